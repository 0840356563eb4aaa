"""Process groups: world size and rank of the group an op runs in, and its name for custom ops."""

from typing import Optional

import torch
import torch.distributed as dist


def resolve(group) -> tuple[int, int, Optional[str]]:
    """(world size, rank, group name) of ``group``; the world group when None and
    torch.distributed is initialised, else a world of 1 (no process group needed)."""
    if group is None:
        if not (dist.is_available() and dist.is_initialized()):
            return 1, 0, None
        group = dist.group.WORLD
    return dist.get_world_size(group), dist.get_rank(group), group.group_name


def by_name(name: Optional[str]):
    """The process group a custom op was given by name (None: no group)."""
    if name is None:
        return None
    return torch.distributed.distributed_c10d._resolve_process_group(name)


def check_same_across_ranks(group, what: str, signature: tuple) -> None:
    """Raises ValueError on every rank when the ranks of ``group`` disagree on ``signature``
    (shapes, dtypes, options): detected before anything is launched, never a hang in a
    collective of mismatched sizes. A no-op at world size 1."""
    world = dist.get_world_size(group)
    if world == 1:
        return
    gathered: list = [None] * world
    dist.all_gather_object(gathered, signature, group=group)
    odd = [r for r, s in enumerate(gathered) if s != gathered[0]]
    if odd:
        raise ValueError(
            f"{what}: the ranks disagree: rank 0 has {gathered[0]}, "
            + ", ".join(f"rank {r} has {gathered[r]}" for r in odd)
        )
