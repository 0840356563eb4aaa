"""The mask of an attention call beyond ``causal``, as flash-attn takes it: a sliding window
(``window_size``) and packed sequences (``cu_seqlens``), checked here with errors naming the
argument; CommIR's ``window``/``documents`` attributes (``mercury_plan::mask``) compute it."""

from __future__ import annotations

from typing import Optional

import torch


def window(window_size) -> Optional[tuple[int, int]]:
    """flash-attn's ``window_size`` checked: None for ``(-1, -1)`` (no window), else the pair."""
    if (
        not isinstance(window_size, (tuple, list))
        or len(window_size) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in window_size)
    ):
        raise TypeError(
            f"window_size must be a pair of ints (left, right), -1 for unbounded, not "
            f"{window_size!r}"
        )
    left, right = window_size
    if left < -1 or right < -1:
        raise ValueError(
            f"window_size {tuple(window_size)}: each side is a number of positions >= 0, or -1 "
            "for unbounded (flash-attn's convention)"
        )
    return None if (left, right) == (-1, -1) else (left, right)


def boundaries(name: str, cu, total: int, world: int) -> list:
    """The prefix sums ``cu`` (flash-attn's ``cu_seqlens``) as a list, checked against the
    ``total`` tokens of all ranks: ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of prefix sums, not {type(cu).__name__}")
    if cu.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name} must be int32 (flash-attn's) or int64, not {cu.dtype}")
    if cu.dim() != 1:
        raise ValueError(f"{name} must be 1-D (sequences + 1 entries), got shape {tuple(cu.shape)}")
    b = cu.tolist()
    if len(b) < 2:
        raise ValueError(f"{name} has {len(b)} entries; give at least [0, total] (one sequence)")
    if b[0] != 0:
        raise ValueError(f"{name} starts at {b[0]}, not 0")
    bad = next((i for i in range(1, len(b)) if b[i] < b[i - 1]), None)
    if bad is not None:
        raise ValueError(
            f"{name} decreases at entry {bad} ({b[bad]} after {b[bad - 1]}): it must be "
            "non-decreasing prefix sums of the sequence lengths"
        )
    if b[-1] != total:
        hint = ""
        if world > 1 and b[-1] * world == total:
            hint = (
                f"; it ends at this rank's {b[-1]} tokens: pass the global cu_seqlens over all "
                f"{world} ranks' tokens (not a rank's local one, as ring-flash-attn's "
                "per-document layout takes)"
            )
        raise ValueError(f"{name} ends at {b[-1]} but there are {total} tokens{hint}")
    return b


def documents(q, k, layout, world, cu_q, cu_k) -> tuple[str, Optional[dict]]:
    """The documents kind of a call (``"none"``, ``"shared"``, ``"split"``) and its
    boundaries by input name, checked against the tokens of all ranks."""
    if cu_q is None and cu_k is None:
        return "none", None
    if cu_q is None or cu_k is None:
        raise ValueError("cu_seqlens_q and cu_seqlens_k come together: give both or neither")
    s_dim = 1 if layout == "bshd" else 2
    bq = boundaries("cu_seqlens_q", cu_q, q.shape[s_dim] * world, world)
    bk = boundaries("cu_seqlens_k", cu_k, k.shape[s_dim] * world, world)
    if len(bq) != len(bk):
        raise ValueError(
            f"cu_seqlens_q holds {len(bq) - 1} sequences and cu_seqlens_k {len(bk) - 1}: each "
            "query sequence attends to the key sequence of the same index"
        )
    if bq == bk:
        return "shared", {"D": bq}
    return "split", {"Dq": bq, "Dk": bk}
