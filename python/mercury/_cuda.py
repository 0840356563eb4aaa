"""CUDA tensors: the plan's executor on the tensors' GPU (every rank a virtual rank there)."""

from __future__ import annotations

import atexit
import functools
import os
import weakref
from pathlib import Path
from typing import Optional

import torch

from . import _group, _mercury

_PTX_HELP = (
    "set MERCURY_DEVICE_KERNELS to the PTX of "
    "`mercury-opt --emit=ptx --all-device-kernels --chip sm_XX OP.mlir` (the executor's "
    "fixed kernels, and the generated tile kernels of an operator that has tile ops)"
)


@functools.lru_cache(maxsize=4)
def _read_ptx(path: str) -> str:
    return Path(path).read_text()


def device_kernels() -> str:
    """The device kernels' PTX: ``$MERCURY_DEVICE_KERNELS``, else the package's own copy."""
    path = os.environ.get("MERCURY_DEVICE_KERNELS")
    if not path:
        packaged = Path(__file__).with_name("device_kernels.ptx")
        if not packaged.is_file():
            raise RuntimeError(f"no device kernels for the CUDA executor: {_PTX_HELP}")
        path = str(packaged)
    try:
        return _read_ptx(path)
    except OSError as e:
        raise RuntimeError(f"cannot read the device kernels '{path}': {e}; {_PTX_HELP}") from e


def _load_torch_cudnn() -> None:
    """Makes torch load its cuDNN (if it has not): the executor then finds that library in
    this process (``/proc/self/maps``) and uses it, rather than load a second copy;
    ``MERCURY_CUDNN_LIB`` still names another when set."""
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.version()


def readable(name: str, t: torch.Tensor) -> None:
    """Refuses, with ``ValueError`` naming the tensor and why, device memory the executor
    cannot read where it is (it reads any strides but a zero one: each element must have an
    address of its own)."""
    for d, (n, st) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if n > 1 and st == 0:
            raise ValueError(
                f"{name}: dimension {d} has stride 0 (an expanded or broadcast tensor); the "
                "executor reads every element where it is: pass a tensor that holds each "
                "element (.contiguous())"
            )


#: Executors with a run launched and not yet waited for (``mercury.synchronize`` waits for
#: them).
_launched: weakref.WeakSet = weakref.WeakSet()


def synchronize() -> None:
    """Waits for every run launched and not yet waited for; raises the first fault."""
    first = None
    for r in list(_launched):
        _launched.discard(r)
        try:
            r.native.wait()
        except Exception as e:  # noqa: BLE001 - every runner is waited for, the first raised
            first = first or e
    if first is not None:
        raise first


class Bound:
    """An operator's executor on one GPU with the layout of the tensors last bound to it."""

    def __init__(self, native_runner, pieces: Optional[dict] = None):
        self.native = native_runner
        self.names = [n for n, _ in native_runner.buffers]
        self.outputs = [o for _, o in native_runner.buffers]
        # Per buffer (plan order): this process's regions, ((offsets, extents, local), ...);
        # None: the whole buffer in one tensor.
        self.pieces = [None if pieces is None else pieces[n] for n in self.names]
        self.layout = None

    def launch(self, tensors: list, stream: int) -> None:
        """Binds ``tensors`` (one per buffer, plan order) and enqueues a run on ``stream``.
        On the layout of the last call (the same strides: a cached shape) only the addresses
        change; a new layout is checked (:func:`readable`) and set first."""
        layout = [t.stride() for t in tensors]
        if layout != self.layout:
            for name, t, out in zip(self.names, tensors, self.outputs, strict=True):
                if not out:
                    readable(f"input '{name}'", t)
            for i, t in enumerate(tensors):
                ps = self.pieces[i] or (((0,) * t.dim(), tuple(t.shape), None),)
                self.native.set_layout(i, [(list(o), list(e), list(t.stride())) for o, e, _ in ps])
            self.layout = layout
        ptrs = []
        for t, ps in zip(tensors, self.pieces, strict=True):
            base = t.data_ptr()
            if ps is None:
                ptrs.append(base)
                continue
            es, st = t.element_size(), t.stride()
            for _, _, local in ps:
                ptrs.append(base + es * sum(a * b for a, b in zip(local, st, strict=True)))
        self.native.launch(ptrs, stream)
        _launched.add(self)

    def launch_named(self, tensors: dict, ordinal: int) -> None:
        """:meth:`launch` with this process's tensor of every buffer by name, on GPU
        ``ordinal``'s current stream."""
        self.launch([tensors[n] for n in self.names], current_stream(ordinal))

    def wait(self) -> float:
        """Waits for the last run (faults raised); its device time in ms."""
        _launched.discard(self)
        return self.native.wait()


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(ordinal: int) -> int:
    """The ``CUstream`` of GPU ``ordinal``'s current stream (``torch.cuda.current_stream``'s
    ``cuda_stream``), read without making a ``torch.cuda.Stream`` object (which queries the
    stream's priority each time: a few microseconds of every call)."""
    if _raw_stream is not None:
        return _raw_stream(ordinal)
    return torch.cuda.current_stream(ordinal).cuda_stream


def _torch_alloc(size: int, device: int, stream: int) -> int:
    return torch.cuda.caching_allocator_alloc(size, device, stream)


def _torch_free(ptr: int) -> None:
    torch.cuda.caching_allocator_delete(ptr)


@functools.lru_cache(maxsize=1)
def use_torch_allocator() -> None:
    """Every device allocation of the executors (slots, scratch, cuDNN and cuBLASLt
    workspaces) from torch's caching allocator, each block on the stream that uses it; at
    interpreter exit the allocator is closed (frees then skipped: the process is ending)."""
    _mercury.use_allocator(_torch_alloc, _torch_free)
    atexit.register(_mercury.use_allocator)


def runner(op, ordinal: int) -> Bound:
    """The executor of ``op`` (a :class:`mercury.Op`) on GPU ``ordinal``, every rank a virtual
    rank there, built on first use."""
    r = op._runners.get(ordinal)
    if r is None:
        _load_torch_cudnn()
        use_torch_allocator()
        with torch.cuda.device(ordinal):
            r = Bound(op._native.cuda_runner(ordinal, device_kernels()))
        op._runners[ordinal] = r
    return r


def run_bound(
    op,
    inputs: dict,
    outputs: dict,
    device: torch.device,
    r: Optional[Bound],
    documents: Optional[dict] = None,
) -> None:
    """Runs ``op`` on ``inputs`` into ``outputs`` (CUDA tensors of ``device``, this process's
    tensors of every buffer) on the runner ``r`` (None: every rank a virtual rank on
    ``device``), ordered on the current stream, no host synchronisation. ``documents``: the
    run's document boundaries by name (prefix sums), set on the executor before the launch."""
    ordinal = device.index if device.index is not None else torch.cuda.current_device()
    if r is None:
        r = runner(op, ordinal)
    if documents:
        # The executor refills its masked blocks' row bounds (waits for a launched run).
        r.native.set_documents([(n, [int(x) for x in b]) for n, b in documents.items()])
    # The executor binds its GPU's context itself; the stream is that GPU's current one.
    r.launch_named({**inputs, **outputs}, ordinal)
    op._last_runner = r


#: This process's NCCL communicator per process group (by group name): (communicator, GPU).
_comms: dict = {}


def _agree_or_raise(group, what: str, error: Optional[str], schedule: str) -> None:
    """Every rank of ``group`` learns whether any failed ``what`` and which schedule each
    compiled (a host all-gather over the group): all raise together, rather than some wait in
    NCCL for ranks that gave up or pair their messages with another plan's."""
    got = _group.all_gather_objects(group, (error, schedule))
    bad = [(r, e) for r, (e, _) in enumerate(got) if e is not None]
    if bad:
        raise RuntimeError(f"{what}: " + "; ".join(f"rank {r}: {e}" for r, e in bad))
    odd = [r for r, (_, s) in enumerate(got) if s != got[0][1]]
    if odd:
        raise RuntimeError(
            f"{what}: the ranks compiled different schedules (rank 0: {got[0][1]!r}; "
            + ", ".join(f"rank {r}: {got[r][1]!r}" for r in odd)
            + "): give every rank the same schedule (or the same schedule cache)"
        )


def forget_groups() -> None:
    """Drops the communicators of a destroyed default group's process groups (a new default
    group reuses their names); their group executors are keyed by :data:`_group.epoch`."""
    _comms.clear()


def communicator(call, ordinal: int):
    """The NCCL communicator of ``call``'s process group on GPU ``ordinal``, made on first use
    from the NCCL torch loaded: rank 0 of the group makes a unique id, the group broadcasts it,
    every rank joins (all at the same call: the ops check first that the ranks agree)."""
    got = _comms.get(call.group_name)
    if got is not None:
        comm, at = got
        if at != ordinal:
            raise ValueError(
                f"process group '{call.group_name}': this rank's communicator is on GPU {at}, "
                f"the tensors on GPU {ordinal}: keep each rank's tensors on one GPU"
            )
        return comm
    box = None
    if call.rank == 0:
        try:
            box = ("id", _mercury.nccl_unique_id())
        except Exception as e:  # noqa: BLE001 - sent to every rank, raised everywhere
            box = ("error", f"{type(e).__name__}: {e}")
    # Rank 0's id (or its error) to every rank.
    box = _group.all_gather_objects(call.group, box)[0]
    kind, value = box
    if kind == "error":
        raise RuntimeError(f"process group '{call.group_name}': rank 0 has no NCCL id: {value}")
    with torch.cuda.device(ordinal):
        comm = _mercury.GroupComm(value, call.rank, call.world, ordinal)
    _comms[call.group_name] = (comm, ordinal)
    return comm


def run_group(
    call, inputs: dict, outputs: dict, device: torch.device, documents: Optional[dict] = None
) -> None:
    """``call`` over its process group on CUDA tensors (world size > 1): this rank's plan rank
    on ``device``, the others in the group's other processes, over NCCL; ``inputs`` and
    ``outputs`` are this rank's shards, read and written where they are."""
    ordinal = device.index if device.index is not None else torch.cuda.current_device()
    key = ("group", call.group_name, _group.epoch, ordinal)
    r = call.op._runners.get(key)
    if r is None:
        comm = communicator(call, ordinal)
        _load_torch_cudnn()
        use_torch_allocator()
        error, native = None, None
        try:
            with torch.cuda.device(ordinal):
                native = call.op._native.cuda_group_runner(comm, device_kernels())
        except Exception as e:  # noqa: BLE001 - every rank learns of it, then all raise
            error = f"{type(e).__name__}: {e}"
        what = f"@{call.op.kernel} over {call.world} ranks"
        _agree_or_raise(call.group, what, error, call.op.schedule)
        r = Bound(native, call.pieces)
        call.op._runners[key] = r
    run_bound(call.op, inputs, outputs, device, r, documents)


def placed_runner(op, devices: list) -> Bound:
    """The executor of ``op`` over the GPUs ``devices`` of this process (rank r on
    ``devices[r % len(devices)]``), built on first use."""
    key = ("placed", tuple(devices))
    r = op._runners.get(key)
    if r is None:
        _load_torch_cudnn()
        use_torch_allocator()
        with torch.cuda.device(devices[0]):
            r = Bound(op._native.cuda_placed_runner(list(devices), device_kernels()))
        op._runners[key] = r
    return r


def run(
    op,
    inputs: dict[str, torch.Tensor],
    documents: Optional[dict] = None,
    devices: Optional[list] = None,
) -> dict[str, torch.Tensor]:
    """Runs ``op`` (a :class:`mercury.Op`) on full CUDA tensors of one GPU, every rank a
    virtual rank there (or with ``devices``, spread over those GPUs, the tensors on the
    first): the inputs read where they are, the outputs allocated through torch's caching
    allocator, the run ordered on the current stream (no host synchronisation)."""
    device = next(iter(inputs.values())).device
    r = None
    if devices is not None:
        at = device.index if device.index is not None else torch.cuda.current_device()
        if at != devices[0]:
            raise ValueError(
                f"devices={devices}: the tensors are on cuda:{at}, but the operator's buffers "
                f"live on devices[0] (cuda:{devices[0]}): move them there"
            )
        r = placed_runner(op, devices)
    outs = {
        n: torch.empty(shape, dtype=dtype, device=device)
        for n, (dtype, shape) in op.outputs.items()
    }
    run_bound(op, inputs, outs, device, r, documents)
    return outs
