"""Sequence shards: contiguous blocks, or ring-flash-attn's zigzag (load-balanced causal)."""

from typing import Optional

import torch
import torch.distributed as dist

from . import _group

_BALANCES = (None, "zigzag")


def _check_balance(balance: Optional[str]) -> None:
    if balance not in _BALANCES:
        raise ValueError(f"balance must be None (contiguous shards) or 'zigzag', not {balance!r}")


def shard_sequence(
    x: torch.Tensor, group=None, *, balance: Optional[str] = None, dim: int = 1
) -> torch.Tensor:
    """This rank's sequence shard of the full tensor ``x`` along ``dim``.

    ``balance=None``: block ``rank`` of ``world`` equal blocks. ``balance="zigzag"``: ``x`` cut
    into ``2 * world`` chunks, this rank holding chunks ``rank`` and ``2 * world - 1 - rank``
    (ring-flash-attn's ``zigzag_ring_flash_attn_func`` layout, torch context parallel's load
    balancing), concatenated. The length must divide evenly; returns a new contiguous tensor.
    """
    _check_balance(balance)
    world, rank, _ = _group.resolve(group)
    n = x.shape[dim]
    parts = 2 * world if balance == "zigzag" else world
    if n % parts != 0:
        raise ValueError(
            f"shard_sequence: dimension {dim} of length {n} does not split into {parts} equal "
            f"{'zigzag chunks' if balance else 'shards'} over {world} ranks"
        )
    chunks = x.chunk(parts, dim)
    if balance == "zigzag":
        return torch.cat([chunks[rank], chunks[parts - 1 - rank]], dim).contiguous()
    return chunks[rank].contiguous()


def unshard_sequence(
    x: torch.Tensor, group=None, *, balance: Optional[str] = None, dim: int = 1
) -> torch.Tensor:
    """The full tensor from every rank's shard ``x`` (the inverse of :func:`shard_sequence`):
    an all-gather over ``group`` and the chunks put back in sequence order."""
    _check_balance(balance)
    world, _, _ = _group.resolve(group)
    if world == 1:
        return x.contiguous().clone()
    g = dist.group.WORLD if group is None else group
    shards = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(shards, x.contiguous(), group=g)
    if balance != "zigzag":
        return torch.cat(shards, dim)
    if x.shape[dim] % 2 != 0:
        raise ValueError(f"unshard_sequence: a zigzag shard of odd length {x.shape[dim]}")
    heads = [s.chunk(2, dim)[0] for s in shards]
    tails = [s.chunk(2, dim)[1] for s in reversed(shards)]
    return torch.cat(heads + tails, dim)
