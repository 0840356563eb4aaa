"""Packed documents reordered so that every rank's sequence shard holds about the same
attention work (``mercury_plan::balance``, the role of MagiAttention's dispatch solver and of
torch context parallel's per-document load balancer, moving whole documents)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from . import _group, _mask, _mercury, _sequence


@dataclasses.dataclass(frozen=True, eq=False)
class DocumentOrder:
    """A balanced packing of a batch's documents (:func:`balance_documents`).

    ``order``: int64 ``[documents]``, the given documents' indices in their new packing order.
    ``cu_seqlens``: int32 prefix sums of the new packing (on the given ``cu_seqlens``' device).
    ``index``: int64 ``[total]``, token ``t`` of the new packing is token ``index[t]`` of the
    given one. ``max_seqlen``: the longest document (``varlen_attention``'s ``max_seqlen``).
    ``before`` / ``after``: the busiest rank's attention work (query-key pairs its query rows
    see) over the mean, packed as given and as reordered.
    """

    order: torch.Tensor
    cu_seqlens: torch.Tensor
    index: torch.Tensor
    max_seqlen: int
    before: float
    after: float

    def apply(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """``x`` (all ``total`` tokens along ``dim``, packed as given) in the new packing."""
        self._check(x, dim, "apply")
        return x.index_select(dim, self.index.to(x.device))

    def restore(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """``x`` (all tokens along ``dim``, in the new packing) back in the given packing: the
        inverse of :meth:`apply`."""
        self._check(x, dim, "restore")
        inverse = torch.empty_like(self.index)
        inverse[self.index] = torch.arange(len(self.index), device=self.index.device)
        return x.index_select(dim, inverse.to(x.device))

    def _check(self, x, dim, what):
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"DocumentOrder.{what}: x must be a torch.Tensor, not {type(x).__name__}"
            )
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"DocumentOrder.{what}: dim must be an int, not {dim!r}")
        if not -x.dim() <= dim < x.dim():
            raise ValueError(
                f"DocumentOrder.{what}: dim {dim} is out of range for x of {x.dim()} dimensions"
            )
        if x.shape[dim] != len(self.index):
            raise ValueError(
                f"DocumentOrder.{what}: dimension {dim} of x has {x.shape[dim]} tokens, the "
                f"documents {len(self.index)}: give every rank's tokens (the full packed batch)"
            )


def balance_documents(
    cu_seqlens: torch.Tensor,
    world_size: Optional[int] = None,
    *,
    group=None,
    balance: Optional[str] = None,
    causal: bool = True,
    window_size=(-1, -1),
    chunk_size: Optional[int] = None,
) -> DocumentOrder:
    """A packing order of the documents of ``cu_seqlens`` (flash-attn's prefix sums over the
    whole batch) that spreads attention work evenly over ``world_size`` sequence shards (the
    ranks the sequence is sharded over; by default the size of ``group``, the world group when
    None; given both, they must agree), laid out as
    :func:`mercury.shard_sequence` lays them out with ``balance`` (None: contiguous; "zigzag")
    and ``chunk_size`` (the zigzag over chunks of that many tokens).

    Attention inside documents does not depend on the order of the documents (each keeps its
    tokens contiguous and in order: its mask and its positions are unchanged), but a rank's
    work does. Pack the documents in ``result.order`` (a data loader), or reorder packed tensors
    with ``result.apply(x)``, then shard and call :func:`mercury.varlen_attention` with
    ``result.cu_seqlens``; ``result.restore(y)`` puts full tensors back in the given order.
    ``causal`` and ``window_size`` are the attention's (the work they leave is what is
    balanced). Deterministic: every rank given the same ``cu_seqlens`` gets the same order.
    Documents are moved whole, so one longer than a shard's piece keeps some imbalance
    (``result.after`` says how much) unless the zigzag runs in several rounds: with
    ``balance="zigzag", chunk_size=total // (16 * world_size)`` (8 rounds) long-tail batches
    of 32K to 512K tokens on 8 ranks came within 1.013x of the mean (docs/perf.md); rounds
    cut the ring's steps into more attention blocks, a cost not measured on a GPU yet
    (docs/python.md). The search takes milliseconds of host time (tens at hundreds of
    documents).

    Raises ``TypeError``/``ValueError`` naming the argument; ``ValueError`` when the total does
    not split into the shards.
    """
    lay = _sequence.layout(balance, chunk_size)
    zigzag, chunk = _sequence.parse(lay)
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(
            f"cu_seqlens must be a torch.Tensor of prefix sums, not {type(cu_seqlens).__name__}"
        )
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be 1-D with at least 2 entries (documents + 1), got shape "
            f"{tuple(cu_seqlens.shape)}"
        )
    if cu_seqlens.device.type == "meta":
        raise ValueError("cu_seqlens is a meta tensor: the balancer reads its values")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, not {type(causal).__name__}")
    win = _mask.window(window_size)
    if world_size is None:
        world_size, _, _ = _group.resolve(group)
    elif not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, not {world_size!r}")
    elif group is not None and world_size != (ranks := _group.resolve(group)[0]):
        raise ValueError(f"world_size {world_size} but the group has {ranks} ranks")
    total = int(cu_seqlens[-1])
    if chunk is not None:
        _sequence.runs(total, world_size, 0, lay, "mercury.balance_documents: the documents")
    b = _mask.boundaries("cu_seqlens", cu_seqlens, total, 1)
    lengths = [b[i + 1] - b[i] for i in range(len(b) - 1)]
    left, right = (None, None) if win is None else win
    left = None if left is None or left < 0 else left
    right = None if right is None or right < 0 else right
    try:
        order, before, after = _mercury.balance_documents(
            lengths, positions=total, ranks=world_size, zigzag=zigzag,
            causal=causal, left=left, right=right, chunk=chunk,
        )  # fmt: skip
    except ValueError as e:
        raise ValueError(f"mercury.balance_documents: {e}") from None
    order_t = torch.tensor(order, dtype=torch.int64)
    length = torch.tensor(lengths, dtype=torch.int64)[order_t]
    start = torch.tensor(b[:-1], dtype=torch.int64)[order_t]
    sums = torch.cat([torch.zeros(1, dtype=torch.int64), length.cumsum(0)])
    # Token t of a document now starting at sums[d] was token t - sums[d] + start[d].
    index = torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(
        start - sums[:-1], length
    )
    return DocumentOrder(
        order=order_t,
        cu_seqlens=sums.to(dtype=torch.int32, device=cu_seqlens.device),
        index=index,
        max_seqlen=max(lengths, default=0),
        before=before,
        after=after,
    )
