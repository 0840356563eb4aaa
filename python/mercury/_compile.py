"""``mercury.compile`` and the compiled operator ``Op``."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from . import _cuda, _mercury

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def schedule_cache_dir() -> str | None:
    """The schedule cache ``schedule="auto"`` reads and writes.

    ``$MERCURY_CACHE_DIR`` when set (an empty value: no cache), else
    ``$XDG_CACHE_HOME/mercury/schedules`` (``~/.cache/mercury/schedules``).
    """
    env = os.environ.get("MERCURY_CACHE_DIR")
    if env is not None:
        return env or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mercury", "schedules")


def _read_source(source: str | os.PathLike) -> tuple[str, str]:
    """(text, name): a path is read and names its diagnostics; anything else is CommIR text."""
    if isinstance(source, os.PathLike):
        path = Path(source)
        return path.read_text(), str(path)
    if not isinstance(source, str):
        raise TypeError(f"source must be CommIR text or a path, not {type(source).__name__}")
    if "\n" not in source and source.endswith(".mlir"):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no CommIR file '{source}'")
        return path.read_text(), source
    return source, "<source>"


def compile(
    source: str | os.PathLike,
    *,
    kernel: str | None = None,
    schedule: str | os.PathLike = "auto",
    topology: str | os.PathLike | None = None,
) -> Op:
    """Compiles a CommIR operator with a schedule.

    ``source`` is CommIR text or a path to a ``.mlir`` file; ``kernel`` names the kernel of a
    file holding several. ``schedule`` is ``"auto"`` (the search's pick on ``topology``, through
    the schedule cache: :func:`schedule_cache_dir`), ``"none"`` (the operator as declared), a
    pass name (``"shift-shard"``), a schedule script (one pass per line), a pass pipeline
    (``"builtin.module(...)"``) or a ``.sched``/``.transform`` path. ``topology`` is a preset
    name (``"h100-1x8"``) or a topology TOML file; by default one node of the operator's devices.

    Raises :class:`mercury.CompileError` (a ``ValueError``) with the located diagnostic
    (``file:line:col: error: ...``) for what the parser, the verifier, a pass or the lowering
    refuses, and ``ValueError`` for other bad input.
    """
    text, name = _read_source(source)
    native = _mercury.compile(
        text,
        name,
        kernel=kernel,
        schedule=os.fspath(schedule),
        topology=None if topology is None else os.fspath(topology),
        cache=schedule_cache_dir(),
    )
    return Op(native)


def _prefix_sums(name: str, b) -> list[int]:
    """Document boundaries given by name: an integer tensor or a sequence of ints."""
    if isinstance(b, torch.Tensor):
        if b.dtype.is_floating_point or b.dtype.is_complex or b.dtype == torch.bool or b.dim() != 1:
            raise TypeError(
                f"document boundaries '{name}' must be a 1-D integer tensor of prefix sums, got "
                f"{b.dtype} of shape {tuple(b.shape)}"
            )
        return b.tolist()
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in b):
        raise TypeError(f"document boundaries '{name}' must be ints (prefix sums), got {b!r}")
    return list(b)


def _devices(devices) -> list[int]:
    """``devices=`` of :meth:`Op.__call__` checked: a non-empty sequence of GPU ordinals."""
    ok = isinstance(devices, (list, tuple)) and len(devices) > 0
    if ok:
        ok = all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)
    if not ok:
        raise ValueError(f"devices must be a non-empty list of GPU ordinals, not {devices!r}")
    return list(devices)


class Op:
    """A compiled operator: its schedule, reports and buffers; call it on full tensors."""

    def __init__(self, native: _mercury.Operator):
        self._native = native
        #: The executor of each GPU this operator ran on (built on first use, then reused).
        self._runners: dict = {}
        self._last_runner = None

    @property
    def last_device_ms(self) -> float | None:
        """The device time of the last run on CUDA tensors (its stages, CUDA events), in ms;
        waits for that run. None before any."""
        r = self._last_runner
        return None if r is None else r.wait()

    @property
    def last_enqueue_us(self) -> float | None:
        """Host time of the executor's last launch on CUDA tensors, in microseconds (what a
        call costs below the Python package). None before any."""
        r = self._last_runner
        return None if r is None else r.native.last_enqueue_us

    @property
    def schedule(self) -> str:
        """The schedule that ran, as a schedule script (``""`` for ``"none"``)."""
        return self._native.schedule

    @property
    def decision(self) -> str | None:
        """How ``schedule="auto"`` chose the schedule (one line); None for a given schedule."""
        return self._native.decision

    @property
    def comm_plan(self) -> str:
        """The communication plan, as ``mercury-opt --commir-print-comm-plan`` prints it."""
        return self._native.comm_plan

    @property
    def memory(self) -> str:
        """The memory report: peak bytes per rank and what holds them."""
        return self._native.memory

    @property
    def kernel(self) -> str:
        return self._native.kernel

    @property
    def ranks(self) -> int:
        """Ranks of the plan (the devices of the operator's mesh)."""
        return self._native.ranks

    @property
    def inputs(self) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
        """``{name: (dtype, shape)}`` of the input buffers, in declaration order."""
        return {n: (_DTYPES[d], tuple(s)) for n, d, s in self._native.inputs}

    @property
    def outputs(self) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
        """``{name: (dtype, shape)}`` of the output buffers, in declaration order."""
        return {n: (_DTYPES[d], tuple(s)) for n, d, s in self._native.outputs}

    @property
    def documents(self) -> dict[str, int]:
        """``{name: positions}`` of the run-time document boundaries inputs
        (``commir.documents``: prefix sums, flash-attn's ``cu_seqlens``, over that many
        positions), in declaration order; passed by name with every call."""
        return dict(self._native.documents)

    def plan_json(self) -> str:
        """The per-rank plan as JSON (``mercury-opt --emit=plan``)."""
        return self._native.plan_json()

    def __repr__(self) -> str:
        how = self.decision or "given"
        return f"<mercury.Op @{self.kernel}: {self.ranks} ranks, schedule {how}>"

    def __call__(self, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Runs every rank in this process on full (unsharded) tensors keyed by the input
        buffers' names; returns the full outputs keyed by the output buffers' names.

        CPU tensors run on the CPU reference executor (f64 arithmetic; outputs rounded to
        their buffers' dtypes); CUDA tensors on the CUDA executor, every rank a virtual rank on
        the tensors' GPU, read where they are and ordered on the current stream without a host
        synchronisation (``op.last_device_ms``: the run's device time). ``devices=[0, 1, ...]``
        (CUDA tensors, on ``devices[0]``) spreads the ranks over those GPUs of this process
        instead: rank ``r`` on ``devices[r % len(devices)]``, copies between GPUs on the copy
        engine; a GPU may be named twice (two device ids on it: the multi-GPU paths on one
        GPU). (An input buffer named ``devices`` takes the keyword instead.) A tensor whose
        dtype or shape is not its buffer's, a missing or unknown name, a zero stride, or tensors
        on several devices are refused with ``ValueError``. Document boundaries
        (:attr:`documents`) are passed by name too, as integer tensors or sequences of prefix
        sums (``0 = c[0] <= ... <= c[n] <= positions``), one plan for any boundaries.
        """
        placed = None
        if "devices" in inputs and "devices" not in self.inputs:
            placed = _devices(inputs.pop("devices"))
        documents = {}
        for name in self.documents:
            if name in inputs:
                documents[name] = _prefix_sums(name, inputs[name])
        inputs = {n: t for n, t in inputs.items() if n not in documents}
        for name, t in inputs.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"input '{name}' must be a torch.Tensor, not {type(t).__name__}")
        self._native.check_inputs([(n, str(t.dtype), list(t.shape)) for n, t in inputs.items()])
        devices = {t.device.type for t in inputs.values()}
        if len(devices) > 1:
            where = ", ".join(f"{n} on {t.device}" for n, t in inputs.items())
            raise ValueError(f"the inputs are on several devices ({where}): put them on one")
        device = devices.pop() if devices else "cpu"
        if placed is not None and device != "cuda":
            raise ValueError(
                f"devices={placed}: spreading the ranks over GPUs takes CUDA tensors (on "
                f"cuda:{placed[0]}); the inputs are on {device}"
            )
        if device == "cpu":
            return self._run_cpu(inputs, documents)
        if device == "cuda":
            gpus = {t.device for t in inputs.values()}
            if len(gpus) > 1:
                raise ValueError(f"the inputs are on several GPUs ({sorted(map(str, gpus))})")
            return _cuda.run(self, inputs, documents, placed)
        raise ValueError(
            f"inputs on {device}: op(**inputs) runs CPU tensors (the CPU reference executor) "
            "or CUDA tensors (the CUDA executor, every rank on the tensors' GPU)"
        )

    def _run_cpu(
        self, inputs: dict[str, torch.Tensor], documents: dict[str, list] | None = None
    ) -> dict[str, torch.Tensor]:
        held = {n: t.detach().to(torch.float64).contiguous() for n, t in inputs.items()}
        outs = {
            n: torch.full(shape, float("nan"), dtype=torch.float64)
            for n, (_, shape) in self.outputs.items()
        }
        self._native.run_cpu(
            [(n, t.data_ptr(), t.numel()) for n, t in held.items()],
            list((documents or {}).items()),
            [(n, t.data_ptr(), t.numel()) for n, t in outs.items()],
        )
        return {n: outs[n].to(dtype) for n, (dtype, _) in self.outputs.items()}
