"""CUDA tensors: the plan's executor on the tensors' GPU (every rank a virtual rank there)."""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import torch

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


def run(op, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Runs ``op`` (a :class:`mercury.Op`) on CUDA tensors of one GPU; returns its outputs,
    allocated through torch's caching allocator on that GPU, ordered on the current stream."""
    device = next(iter(inputs.values())).device
    ordinal = device.index if device.index is not None else torch.cuda.current_device()
    _point_at_torch_cudnn()
    ptx = device_kernels()
    with torch.cuda.device(ordinal):
        stream = torch.cuda.current_stream()
        # Dense row-major operands (a strided tensor is copied on the device first).
        held = {n: t.detach().contiguous() for n, t in inputs.items()}
        outs = {
            n: torch.empty(shape, dtype=dtype, device=device)
            for n, (dtype, shape) in op.outputs.items()
        }
        op.last_device_ms = op._native.run_cuda(
            [(n, t.data_ptr()) for n, t in held.items()],
            [(n, t.data_ptr()) for n, t in outs.items()],
            stream.cuda_stream,
            ordinal,
            ptx,
        )
    return outs
