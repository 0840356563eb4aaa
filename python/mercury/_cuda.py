"""CUDA tensors: the plan's executor on the tensors' GPU (every rank a virtual rank there)."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import weakref
from pathlib import Path
from typing import Optional

import torch

from . import _mercury

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


def _point_at_torch_cudnn() -> None:
    """The cuDNN torch uses (the nvidia-cudnn package), unless MERCURY_CUDNN_LIB names one."""
    if os.environ.get("MERCURY_CUDNN_LIB"):
        return
    spec = importlib.util.find_spec("nvidia.cudnn")
    for base in spec.submodule_search_locations or [] if spec else []:
        lib = Path(base) / "lib"
        if (lib / "libcudnn.so.9").is_file():
            os.environ["MERCURY_CUDNN_LIB"] = str(lib)
            return


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
        """Binds ``tensors`` (one per buffer, plan order) and enqueues a run on ``stream``."""
        layout = [t.stride() for t in tensors]
        if layout != self.layout:
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

    def wait(self) -> float:
        """Waits for the last run (faults raised); its device time in ms."""
        _launched.discard(self)
        return self.native.wait()


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
        _point_at_torch_cudnn()
        use_torch_allocator()
        with torch.cuda.device(ordinal):
            r = Bound(op._native.cuda_runner(ordinal, device_kernels()))
        op._runners[ordinal] = r
    return r


def run_bound(op, inputs: dict, outputs: dict, device: torch.device, r: Optional[Bound]) -> None:
    """Runs ``op`` on ``inputs`` into ``outputs`` (CUDA tensors of ``device``, this process's
    tensors of every buffer) on the runner ``r`` (None: every rank a virtual rank on
    ``device``), ordered on the current stream, no host synchronisation."""
    ordinal = device.index if device.index is not None else torch.cuda.current_device()
    for name, t in inputs.items():
        readable(f"input '{name}'", t)
    if r is None:
        r = runner(op, ordinal)
    tensors = [
        outputs[n] if o else inputs[n].detach() for n, o in zip(r.names, r.outputs, strict=True)
    ]
    with torch.cuda.device(ordinal):
        r.launch(tensors, torch.cuda.current_stream().cuda_stream)
    op._last_runner = r


def run_group(call, inputs: dict, outputs: dict, device: torch.device) -> None:
    """``call`` over its process group on CUDA tensors (world size > 1)."""
    raise NotImplementedError(
        f"@{call.op.kernel} over {call.world} ranks on CUDA tensors: the NCCL path from a "
        "process group is not in this build (CPU tensors run over any group)"
    )


def run(op, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Runs ``op`` (a :class:`mercury.Op`) on full CUDA tensors of one GPU, every rank a
    virtual rank there: the inputs read where they are, the outputs allocated through torch's
    caching allocator, the run ordered on the current stream (no host synchronisation)."""
    device = next(iter(inputs.values())).device
    outs = {
        n: torch.empty(shape, dtype=dtype, device=device)
        for n, (dtype, shape) in op.outputs.items()
    }
    run_bound(op, inputs, outs, device, None)
    return outs
