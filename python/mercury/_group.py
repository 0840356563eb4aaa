"""Process groups: world size and rank of the group an op runs in, its name for custom ops,
and small host values exchanged over it."""

import hashlib
import pickle
import weakref
from typing import Optional

import torch
import torch.distributed as dist


def distributed() -> bool:
    """Whether torch.distributed is initialised (a default process group exists)."""
    return dist.is_available() and dist.is_initialized()


#: The default process group the package's caches were made under (a weak reference), and a
#: count of the default groups seen: group names restart after ``destroy_process_group()``, so
#: what is cached by group name (prepared calls, NCCL communicators, group executors) is
#: valid only while the default group it was made under lives.
_world_ref: Optional[weakref.ref] = None
epoch = 0


def new_world() -> bool:
    """Whether the default process group is not the one of the last call (torch.distributed
    initialised again, or for the first time); advances :data:`epoch` when so."""
    global _world_ref, epoch
    w = dist.group.WORLD if distributed() else None
    seen = None if _world_ref is None else _world_ref()
    if seen is w:
        return False
    _world_ref = None if w is None else weakref.ref(w)
    epoch += 1
    return True


def resolve(group) -> tuple[int, int, Optional[str]]:
    """(world size, rank, group name) of ``group``; the world group when None and
    torch.distributed is initialised, else a world of 1 (no process group needed)."""
    if group is None:
        if not distributed():
            return 1, 0, None
        group = dist.group.WORLD
    if not isinstance(group, dist.ProcessGroup):
        # torch.distributed.new_group gives a rank outside the group a plain marker.
        outside = " (new_group's marker for a rank outside it)" if isinstance(group, int) else ""
        raise ValueError(
            f"group must be a torch.distributed ProcessGroup this rank belongs to, not "
            f"{group!r}{outside}"
        )
    return dist.get_world_size(group), dist.get_rank(group), group.group_name


def by_name(name: Optional[str]):
    """The process group a custom op was given by name (None: no group)."""
    if name is None:
        return None
    return torch.distributed.distributed_c10d._resolve_process_group(name)


def _device(group) -> torch.device:
    """Where the group's collectives take tensors: the current GPU for an NCCL-only group,
    else the CPU (gloo, or a group with a backend per device type)."""
    backend = str(dist.get_backend(group))
    if "nccl" in backend and "cpu" not in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather_objects(group, obj) -> list:
    """Every rank's ``obj`` (picklable), in group rank order: two tensor all-gathers over the
    group (lengths, then the padded bytes). torch's ``all_gather_object`` would do, but it
    needs NumPy, which torch does not require."""
    world = dist.get_world_size(group)
    device = _device(group)
    data = pickle.dumps(obj)
    n = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(n) for _ in range(world)]
    dist.all_gather(sizes, n, group=group)
    lengths = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(lengths), dtype=torch.uint8)
    buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    buf = buf.to(device)
    parts = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(parts, buf, group=group)
    return [
        pickle.loads(bytes(p[:m].cpu().tolist()))  # noqa: S301 - the group's own ranks
        for p, m in zip(parts, lengths, strict=True)
    ]


def check_same_across_ranks(group, what: str, signature: tuple) -> None:
    """Raises ValueError on every rank when the ranks of ``group`` disagree on ``signature``
    (shapes, dtypes, options): detected before anything is launched, never a hang in a
    collective of mismatched sizes. A no-op at world size 1.

    One all-gather of an 8-byte digest of the signature per call (one host synchronisation);
    only when the digests differ, a second exchange of the signatures themselves for the
    message (every rank sees the same digests, so every rank takes the same path)."""
    world = dist.get_world_size(group)
    if world == 1:
        return
    data = pickle.dumps(signature)
    digest = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)
    mine = torch.tensor([digest], dtype=torch.int64, device=_device(group))
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=group)
    if all(int(d.item()) == digest for d in every):
        return
    gathered = all_gather_objects(group, signature)
    odd = [r for r, s in enumerate(gathered) if s != gathered[0]]
    if not odd:
        # Equal values pickled apart (1 and 1.0, say): the same signature.
        return
    raise ValueError(
        f"{what}: the ranks disagree: rank 0 has {gathered[0]}, "
        + ", ".join(f"rank {r} has {gathered[r]}" for r in odd)
    )
