"""Packed sequences: flash-attn's ``flash_attn_varlen_func`` over a process group.

The documents of a batch are packed into one sequence of ``total`` tokens (THD tensors,
``[total, heads, head_dim]``) and described by ``cu_seqlens`` (int32 prefix sums of their
lengths). Each document attends only within itself; the boundaries are a run-time input of one
compiled plan (CommIR's ``commir.documents``, ``mercury_plan::mask``), so new lengths every
batch reuse the plan. Over a process group each rank passes its shard of the packed tokens
(contiguous blocks or zigzag chunks, :func:`mercury.shard_sequence` with ``dim=0``) with the
global ``cu_seqlens``.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _group, _mask, _sequence
from ._ops import _eager, _scale, attention_entry


def _refuse(name: str, value, default, why: str) -> None:
    if value is not default and value != default:
        raise ValueError(f"{name}={value!r}: {why}")


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Optional[torch.Tensor] = None,
    *,
    group=None,
    balance: Optional[str] = None,
    schedule: str = "auto",
    return_lse: bool = False,
    topology: Optional[str] = None,
    chunk_size: Optional[int] = None,
):
    """Attention on packed sequences, as flash-attn's ``flash_attn_varlen_func`` takes them
    (the same positional arguments: swap the call), over the sequence sharded across ``group``.

    ``q`` is ``[total_q, heads, head_dim]``, ``k`` and ``v`` ``[total_k, kv_heads, head_dim]``
    (THD: this rank's tokens of the packed batch); k and v may have fewer heads than q
    (grouped-query attention: a divisor) and v its own head dim. ``cu_seqlens_q`` and
    ``cu_seqlens_k`` are int32 (or int64) prefix sums of the sequence lengths over all ranks'
    tokens, ``[0, ..., total]``, the same on every rank; sequence ``d`` of the queries attends
    to sequence ``d`` of the keys only. They are read on the host with each call; new
    boundaries reuse the compiled plan. ``max_seqlen_q``/``max_seqlen_k`` must bound the
    lengths (they are checked, not needed).

    ``causal`` and ``window_size=(left, right)`` are flash-attn's: query ``i`` sees keys
    ``i + sk - sq - left`` to ``i + sk - sq + right`` of its sequence (``sq``, ``sk`` the
    sequence's query and key lengths: aligned at the bottom right), ``-1`` unbounded on that
    side; ``causal`` makes the right side 0. A row that sees no key has output 0 and
    log-sum-exp ``-inf`` (log 0; flash-attn stores ``+inf`` there). ``softmax_scale``
    defaults to ``1/sqrt(head_dim)``.

    Over a process group (``group``, default the world group) each rank passes its shard of
    the packed tokens: block ``rank`` of ``world`` equal blocks (``balance=None``) or chunks
    ``rank`` and ``2*world-1-rank`` of ``2*world`` (``balance="zigzag"``; with ``chunk_size``,
    of every round of ``2*world`` chunks of that many tokens), as
    :func:`mercury.shard_sequence` makes them with ``dim=0``; sequence lengths need not divide
    anything, the total tokens must divide into the shards. A few documents longer than a
    shard balance over the ranks with :func:`mercury.balance_documents`'s order and the zigzag
    in several rounds (``chunk_size = total // (16 * world)``: 8 rounds; each round adds
    attention blocks to every ring step, docs/python.md).

    Returns the output ``[total_q, heads, v_head_dim]`` in q's dtype and, with
    ``return_lse=True``, also the log-sum-exp ``[heads, total_q]`` (flash-attn's
    ``softmax_lse`` of a varlen call; float32, float64 for float64 inputs). Differentiable in
    q, k and v. ``deterministic`` is accepted and changes nothing.

    Raises ``ValueError``/``TypeError`` naming the argument for what it does not compute:
    ``dropout_p != 0``, ``softcap``, ``alibi_slopes``, ``return_attn_probs``, ``block_table``,
    boundaries that do not start at 0, decrease, or do not end at the total tokens, unequal
    numbers of query and key sequences, a ``max_seqlen`` below a sequence's length.
    """
    _refuse("dropout_p", dropout_p, 0.0, "attention dropout is not computed; pass 0.0")
    _refuse("softcap", softcap, 0.0, "soft-capping of the scores is not computed; pass 0.0")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: ALiBi biases are not computed; pass None")
    if return_attn_probs:
        raise ValueError(
            "return_attn_probs=True: the attention probabilities are not returned; "
            "return_lse=True gives the log-sum-exp (flash-attn's softmax_lse)"
        )
    if block_table is not None:
        raise ValueError("block_table: a paged KV cache is not read; pass None")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(
                f"{name} must be 3-D [total_tokens, heads, head_dim] (packed), got shape "
                f"{tuple(t.shape)}; padded [batch, seq, heads, head_dim] goes to mercury.attention"
            )
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"k has {k.shape[0]} tokens but v {v.shape[0]}: they pair up")
    window = _mask.window(window_size)
    balance = _sequence.layout(balance, chunk_size)
    world, _, _ = _group.resolve(group)
    signature = ()
    if _eager():
        # Read once on the host (one copy from the GPU), checked, and passed on as CPU tensors.
        bq = _mask.boundaries("cu_seqlens_q", cu_seqlens_q, q.shape[0] * world, world)
        bk = _mask.boundaries("cu_seqlens_k", cu_seqlens_k, k.shape[0] * world, world)
        for name, bound, b in (
            ("max_seqlen_q", max_seqlen_q, bq),
            ("max_seqlen_k", max_seqlen_k, bk),
        ):
            longest = max(b[i + 1] - b[i] for i in range(len(b) - 1))
            if not isinstance(bound, int) or isinstance(bound, bool):
                hint = " (.item() of a tensor)" if isinstance(bound, torch.Tensor) else ""
                raise TypeError(
                    f"{name} must be an int{hint}, as flash-attn takes it, not "
                    f"{type(bound).__name__} {bound!r}"
                )
            if bound < longest:
                raise ValueError(
                    f"{name}={bound} but the longest sequence has {longest} tokens: it must be "
                    "an int bounding every length"
                )
        cu_seqlens_q = torch.tensor(bq, dtype=torch.int64)
        cu_seqlens_k = torch.tensor(bk, dtype=torch.int64)
        signature = (tuple(bq), tuple(bk))
    o, lse = attention_entry(
        q.unsqueeze(0),
        k.unsqueeze(0),
        v.unsqueeze(0),
        cu_seqlens_q,
        cu_seqlens_k,
        what="mercury.varlen_attention",
        causal=causal,
        softmax_scale=_scale(softmax_scale),
        layout="bshd",
        group=group,
        balance=balance,
        schedule=schedule,
        return_lse=return_lse,
        topology=topology,
        window=window,
        signature=signature,
    )
    return (o[0], lse[0]) if return_lse else o[0]
