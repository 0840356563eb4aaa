"""Sequence shards: contiguous blocks, or ring-flash-attn's zigzag (load-balanced causal), once
or in every round of chunks of ``chunk_size`` positions."""

from typing import Optional

import torch
import torch.distributed as dist

from . import _group

_BALANCES = (None, "zigzag")


def _check_balance(balance: Optional[str]) -> None:
    if balance not in _BALANCES:
        raise ValueError(
            f"balance must be None or 'zigzag' (None: contiguous shards), not {balance!r}"
        )


def layout(balance: Optional[str], chunk_size: Optional[int]) -> Optional[str]:
    """The shard layout of ``balance`` and ``chunk_size`` as the ops carry it: ``None``
    (contiguous), ``"zigzag"`` (one round) or ``"zigzag:C"`` (chunks of C positions).
    ``TypeError``/``ValueError`` naming the argument otherwise."""
    _check_balance(balance)
    if chunk_size is None:
        return balance
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(
            f"chunk_size must be a positive int (positions), not {type(chunk_size).__name__} "
            f"{chunk_size!r}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int (positions), not {chunk_size!r}")
    if balance != "zigzag":
        raise ValueError(
            "chunk_size needs balance='zigzag' (the zigzag repeated over chunks of chunk_size "
            "positions)"
        )
    return f"zigzag:{chunk_size}"


def describe(layout_: Optional[str]) -> str:
    """The user's spelling of a layout from :func:`layout` (in messages)."""
    zigzag, chunk = parse(layout_)
    if chunk is not None:
        return f"balance='zigzag', chunk_size={chunk}"
    return "balance='zigzag'" if zigzag else "balance=None"


def parse(layout_: Optional[str]) -> tuple[bool, Optional[int]]:
    """``(zigzag, chunk)`` of a layout from :func:`layout`."""
    if layout_ is None:
        return False, None
    _, _, chunk = layout_.partition(":")
    return True, int(chunk) if chunk else None


def runs(n: int, world: int, rank: int, layout_: Optional[str], what: str) -> list:
    """``[(start, length), ...]``: the positions of a sequence of ``n`` that ``rank`` of
    ``world`` holds under ``layout_``, in its local order, adjacent runs merged (as the plans
    read them). ``ValueError`` (starting with ``what``) when ``n`` does not split."""
    zigzag, chunk = parse(layout_)
    parts = 2 * world if zigzag else world
    ranks = f"{world} rank{'' if world == 1 else 's'}"
    if chunk is None:
        if n % parts != 0:
            raise ValueError(
                f"{what} of length {n} does not split into {parts} equal "
                f"{'zigzag chunks' if zigzag else 'shards'} over {ranks}"
            )
        chunk = n // parts
    elif n % (parts * chunk) != 0:
        raise ValueError(
            f"{what} of length {n} does not split into rounds of {parts} zigzag chunks of "
            f"chunk_size={chunk} over {ranks} (the length must be a multiple of "
            f"{parts * chunk})"
        )
    if not zigzag:
        return [(rank * chunk, chunk)]
    out: list = []
    for at in range(0, n, parts * chunk):
        for c in (rank, parts - 1 - rank):
            start = at + c * chunk
            if out and out[-1][0] + out[-1][1] == start:
                out[-1] = (out[-1][0], out[-1][1] + chunk)
            else:
                out.append((start, chunk))
    return out


def shard_sequence(
    x: torch.Tensor,
    group=None,
    *,
    balance: Optional[str] = None,
    dim: int = 1,
    chunk_size: Optional[int] = None,
) -> torch.Tensor:
    """This rank's sequence shard of the full tensor ``x`` along ``dim``.

    ``balance=None``: block ``rank`` of ``world`` equal blocks. ``balance="zigzag"``: ``x`` cut
    into ``2 * world`` chunks, this rank holding chunks ``rank`` and ``2 * world - 1 - rank``
    (ring-flash-attn's ``zigzag_ring_flash_attn_func`` layout, torch context parallel's load
    balancing), concatenated. With ``chunk_size``, the zigzag repeats over chunks of that many
    positions: this rank holds chunks ``rank`` and ``2 * world - 1 - rank`` of every round of
    ``2 * world`` chunks, in sequence order (packed batches of a few long documents balance
    better in several rounds: about 8 with :func:`mercury.balance_documents`). The length must
    divide evenly; returns a new contiguous tensor.
    """
    lay = layout(balance, chunk_size)
    world, rank, _ = _group.resolve(group)
    n = x.shape[dim]
    pieces = runs(n, world, rank, lay, f"shard_sequence: dimension {dim}")
    return torch.cat([x.narrow(dim, s, c) for s, c in pieces], dim).contiguous()


def unshard_sequence(
    x: torch.Tensor,
    group=None,
    *,
    balance: Optional[str] = None,
    dim: int = 1,
    chunk_size: Optional[int] = None,
) -> torch.Tensor:
    """The full tensor from every rank's shard ``x`` (the inverse of :func:`shard_sequence`
    with the same ``balance`` and ``chunk_size``): an all-gather over ``group`` and the chunks
    put back in sequence order."""
    lay = layout(balance, chunk_size)
    world, _, _ = _group.resolve(group)
    n = x.shape[dim] * world
    where = [runs(n, world, r, lay, f"unshard_sequence: {world} shards of dimension {dim}")
             for r in range(world)]  # fmt: skip
    if world == 1:
        return x.contiguous().clone()
    g = dist.group.WORLD if group is None else group
    # Ranks that disagree on the layout or the shard's length would put the chunks back in
    # the wrong places: refused on every rank.
    zigzag, chunk = parse(lay)
    mine = torch.tensor([int(zigzag), chunk or 0, x.shape[dim]], device=x.device)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=g)
    if any(not torch.equal(t, every[0]) for t in every):

        def spelled(t):
            lay_ = None if not t[0] else "zigzag" + (f":{int(t[1])}" if t[1] else "")
            return f"{describe(lay_)} with {int(t[2])} positions"

        said = ", ".join(f"rank {r}: {spelled(t)}" for r, t in enumerate(every))
        raise ValueError(f"unshard_sequence: the ranks disagree on their shards ({said})")
    shards = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(shards, x.contiguous(), group=g)
    placed = []
    for shard, rs in zip(shards, where, strict=True):
        at = 0
        for start, length in rs:
            placed.append((start, shard.narrow(dim, at, length)))
            at += length
    placed.sort(key=lambda p: p[0])
    return torch.cat([t for _, t in placed], dim)
