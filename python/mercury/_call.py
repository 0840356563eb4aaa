"""One operator for one call signature: where this rank's tensors sit in the operator's
global buffers, and the run on CPU tensors (the CPU reference executor) or CUDA tensors (the
CUDA executor on the current stream)."""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from . import _cuda, _group, _sequence
from ._compile import Op

#: Sharding of a buffer: ``(dim, kind)``, kind ``"block"`` (rank r holds block r of ``world``),
#: ``"zigzag"`` (chunks r and 2W-1-r of 2W, concatenated) or ``"zigzag:C"`` (chunks r and
#: 2W-1-r of every round of 2W chunks of C positions); ``None``: every rank holds all.
Sharding = Optional[tuple[int, str]]


def pieces(shape, sharding: Sharding, world: int, rank: int) -> tuple:
    """``((offsets, extents, local offsets), ...)``: the regions of a buffer of ``shape`` that
    rank ``rank`` of ``world`` holds, and where each starts in its local tensor."""
    zero = (0,) * len(shape)
    if sharding is None or world == 1:
        return ((zero, tuple(shape), zero),)
    dim, kind = sharding

    def at(v, i):
        return tuple(i if d == dim else x for d, x in enumerate(v))

    # Chunks adjacent in the sequence are adjacent in the local tensor too, and are one region
    # (a plan reads them as one, and a use must lie inside one bound region).
    layout = None if kind == "block" else kind
    out, local = [], 0
    for start, length in _sequence.runs(shape[dim], world, rank, layout, f"dimension {dim}"):
        out.append((at(zero, start), at(shape, length), at(zero, local)))
        local += length
    return tuple(out)


def local_shape(shape, sharding: Sharding, world: int) -> tuple:
    """The shape of one rank's tensor of a buffer of ``shape``."""
    if sharding is None or world == 1:
        return tuple(shape)
    dim, _ = sharding
    return tuple(n // world if d == dim else n for d, n in enumerate(shape))


def _region(t: torch.Tensor, offsets, extents) -> torch.Tensor:
    for d, (o, e) in enumerate(zip(offsets, extents, strict=True)):
        t = t.narrow(d, o, e)
    return t


class Call:
    """A compiled operator, the group it runs in (``world``, this process's ``rank``) and how
    every buffer is sharded over it."""

    def __init__(self, op: Op, group_name: Optional[str], shardings: dict[str, Sharding]):
        self.op = op
        self.group_name = group_name
        group = _group.by_name(group_name)
        self.world = 1 if group is None else dist.get_world_size(group)
        self.rank = 0 if group is None else dist.get_rank(group)
        self.shardings = shardings
        self.shapes = {n: s for n, (_, s) in {**op.inputs, **op.outputs}.items()}
        self.pieces = {
            n: pieces(s, shardings.get(n), self.world, self.rank) for n, s in self.shapes.items()
        }

    @property
    def group(self):
        """The process group, looked up by name at each use: a compiled call (cached for the
        process's life) must not keep a group alive after ``destroy_process_group``, or its
        backend's threads are torn down at interpreter exit, when they can no longer take the
        GIL (gloo aborts the process there)."""
        return _group.by_name(self.group_name)

    def run(
        self,
        inputs: dict[str, torch.Tensor],
        outputs: dict[str, torch.Tensor],
        documents: Optional[dict[str, list]] = None,
    ) -> None:
        """Writes ``outputs`` (this rank's tensors of the output buffers, allocated by the
        caller) from ``inputs`` (this rank's tensors of the input buffers) and ``documents``
        (the document boundaries by input name: the same global prefix sums on every rank)."""
        device = next(iter(inputs.values())).device
        if device.type == "cuda":
            if self.world > 1:
                _cuda.run_group(self, inputs, outputs, device, documents)
            else:
                _cuda.run_bound(self.op, inputs, outputs, device, None, documents)
            return
        if device.type != "cpu":
            raise ValueError(
                f"tensors on {device}: Mercury-rs runs CPU tensors (the CPU reference executor) "
                "and CUDA tensors (the CUDA executor)"
            )
        full = inputs if self.world == 1 else self._gather(inputs)
        got = self.op._run_cpu(full, documents)
        for n, t in outputs.items():
            if self.world == 1:
                t.copy_(got[n])
                continue
            for offsets, extents, local in self.pieces[n]:
                _region(t, local, extents).copy_(_region(got[n], offsets, extents))

    def _gather(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every input's full tensor from every rank's shard (an all-gather over the group):
        the CPU path of a process group, which runs every rank's plan in each process."""
        full = {}
        for n, t in inputs.items():
            t = t.detach().contiguous()
            parts = [torch.empty_like(t) for _ in range(self.world)]
            dist.all_gather(parts, t, group=self.group)
            whole = t.new_empty(self.shapes[n])
            for r, part in enumerate(parts):
                for offsets, extents, local in pieces(
                    self.shapes[n], self.shardings.get(n), self.world, r
                ):
                    _region(whole, offsets, extents).copy_(_region(part, local, extents))
            full[n] = whole
        return full
