"""The distributed operators: attention, all-gather GEMM, GEMM reduce-scatter.

Each is a ``torch.library.custom_op`` (``torch.ops.mercury.*``) with a fake implementation, so
``torch.compile`` traces a model that calls it. Each call compiles the operator for its shapes,
dtype, world size and schedule once (``schedule="auto"``: the search's pick, through the
schedule cache) and keeps it: a later call with the same shapes reuses the compiled plan.
"""

import functools
from typing import Optional

import torch

from . import _group, _mercury
from ._compile import Op, compile

_LAYOUTS = ("bshd", "bhsd")
_NO_BACKWARD = (
    "has no backward yet: Mercury-rs's attention backward patch (CommIR, lowering, executors) "
    "is not in this build; call it under torch.no_grad() or detach its inputs"
)


def synchronize() -> None:
    """Waits for the work Mercury-rs queued on the current CUDA stream (a run's faults are
    raised by the call itself). Without CUDA, nothing to wait for."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.current_stream().synchronize()


@functools.lru_cache(maxsize=256)
def _compiled(text: str, schedule: str, topology: Optional[str]) -> Op:
    return compile(text, schedule=schedule, topology=topology)


#: The compiled operator of the last call (its ``last_device_ms``: the executor's device time).
last_op: Optional[Op] = None


def _run_world1(op: Op, inputs: dict, out: str) -> torch.Tensor:
    """Every rank in this process: the CPU reference executor or the CUDA executor."""
    global last_op
    last_op = op
    return op(**inputs)[out]


def _distributed(what: str, world: int) -> NotImplementedError:
    return NotImplementedError(
        f"{what} over {world} ranks: this build runs world size 1 only (every rank's plan in "
        "one process: mercury.compile(...)(**inputs)); the NCCL path from a process group is "
        "not in it yet"
    )


# --- attention -------------------------------------------------------------------------------


def _attention_shapes(q, k, v, layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be 'bshd' (flash-attn's) or 'bhsd', not {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D ({layout}), got shape {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device: q {q.device}, k {k.device}, v {v.device}")
    s_dim, h_dim = (1, 2) if layout == "bshd" else (2, 1)
    b, s, hq, d = q.shape[0], q.shape[s_dim], q.shape[h_dim], q.shape[3]
    for name, t in (("k", k), ("v", v)):
        if t.shape[0] != b or t.shape[s_dim] != s:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but q {tuple(q.shape)}: batch and sequence "
                f"({layout}) must agree"
            )
    hk = k.shape[h_dim]
    if v.shape[h_dim] != hk:
        raise ValueError(f"k has {hk} heads but v {v.shape[h_dim]} ({layout})")
    if k.shape[3] != d:
        raise ValueError(f"q's head dim is {d} but k's {k.shape[3]}: q.k needs them equal")
    if hq % hk != 0:
        raise ValueError(
            f"q has {hq} heads, k and v {hk}: grouped-query attention needs a multiple"
        )
    return b, s, hq, hk, d, v.shape[3]


@torch.library.custom_op("mercury::attention", mutates_args=())
def _attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    softmax_scale: Optional[float],
    layout: str,
    balance: Optional[str],
    schedule: str,
    topology: Optional[str],
    group_name: Optional[str],
) -> torch.Tensor:
    b, s, hq, hk, d, dv = _attention_shapes(q, k, v, layout)
    group = _group.by_name(group_name)
    world = 1 if group is None else torch.distributed.get_world_size(group)
    if world > 1:
        raise _distributed("mercury.attention", world)
    text = _mercury.attention_commir(
        batch=b,
        heads=hq,
        kv_heads=hk,
        seq=s * world,
        head_dim=d,
        v_head_dim=dv,
        causal=causal,
        scale=softmax_scale,
        dtype=str(q.dtype),
        world=world,
        zigzag=balance == "zigzag",
    )
    op = _compiled(text, schedule, topology)
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    o = _run_world1(op, {"Q": q, "K": k, "V": v}, "O")
    return (o.transpose(1, 2) if layout == "bshd" else o).contiguous()


@_attention_op.register_fake
def _(q, k, v, causal, softmax_scale, layout, balance, schedule, topology, group_name):
    b, s, hq, _, _, dv = _attention_shapes(q, k, v, layout)
    shape = (b, s, hq, dv) if layout == "bshd" else (b, hq, s, dv)
    return q.new_empty(shape)


def _setup_none(ctx, inputs, output):
    del ctx, inputs, output


def _attention_backward(ctx, grad):
    raise NotImplementedError(f"mercury.attention {_NO_BACKWARD}")


_attention_op.register_autograd(_attention_backward, setup_context=_setup_none)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    layout: str = "bshd",
    group=None,
    balance: Optional[str] = None,
    schedule: str = "auto",
    return_lse: bool = False,
    topology: Optional[str] = None,
):
    """Softmax attention over a sequence sharded across ``group``: this rank's output shard.

    ``q, k, v`` are this rank's sequence shard, ``[batch, seq_local, heads, head_dim]`` for
    ``layout="bshd"`` (flash-attn's) or ``[batch, heads, seq_local, head_dim]`` for ``"bhsd"``;
    k and v may have fewer heads than q (grouped-query attention: a divisor) and v its own head
    dim (MLA). ``causal`` masks key positions after the query's in the whole sequence;
    ``softmax_scale`` defaults to ``1/sqrt(head_dim)``. ``balance="zigzag"``: the shards are laid
    out as :func:`mercury.shard_sequence` with ``balance="zigzag"`` makes them. ``group``
    defaults to the world group (world size 1 without torch.distributed). ``schedule`` as in
    :func:`mercury.compile`. Returns the output in q's layout and dtype.
    """
    if balance not in (None, "zigzag"):
        raise ValueError(f"balance must be None or 'zigzag', not {balance!r}")
    if return_lse:
        raise NotImplementedError(
            "mercury.attention(return_lse=True): the CommIR attention operator stores O only; "
            "the log-sum-exp output is not in this build"
        )
    world, _, group_name = _group.resolve(group)
    if world > 1:
        _attention_shapes(q, k, v, layout)
        _group.check_same_across_ranks(
            _group.by_name(group_name),
            "mercury.attention",
            (tuple(q.shape), tuple(k.shape), tuple(v.shape), str(q.dtype), causal, balance),
        )
    return _attention_op(
        q, k, v, causal, softmax_scale, layout, balance, schedule, topology, group_name
    )


# --- AsyncTP's GEMMs -------------------------------------------------------------------------


def _as_rows(x: torch.Tensor, dim: int, what: str, arg: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what}: x must be a torch.Tensor, not {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"{what}: x must have at least 2 dimensions, got {tuple(x.shape)}")
    if dim not in (0, -x.dim()):
        raise ValueError(
            f"{what}: {arg}={dim}: only dimension 0 is supported (the leading dimensions of x "
            "are folded into the rows)"
        )
    return x.reshape(-1, x.shape[-1])


def _agreed(group, what: str, x: torch.Tensor, w: torch.Tensor, dim: int) -> Optional[str]:
    """The group's name, after checking that its ranks pass alike shapes (world size > 1)."""
    world, _, group_name = _group.resolve(group)
    if world > 1:
        signature = (tuple(x.shape), tuple(w.shape), str(x.dtype), dim)
        _group.check_same_across_ranks(_group.by_name(group_name), what, signature)
    return group_name


def _check_w(x2: torch.Tensor, w: torch.Tensor, what: str) -> None:
    if not isinstance(w, torch.Tensor) or w.dim() != 2:
        raise ValueError(f"{what}: w must be a 2-D tensor [k, n], got {getattr(w, 'shape', w)}")
    if w.shape[0] != x2.shape[1]:
        raise ValueError(
            f"{what}: x has {x2.shape[1]} columns but w has {w.shape[0]} rows: x @ w needs them "
            "equal"
        )
    if w.dtype != x2.dtype or w.device != x2.device:
        raise ValueError(f"{what}: x is {x2.dtype} on {x2.device} but w is {w.dtype} on {w.device}")


@torch.library.custom_op("mercury::all_gather_matmul", mutates_args=())
def _all_gather_matmul_op(
    x: torch.Tensor,
    w: torch.Tensor,
    gather_dim: int,
    schedule: str,
    topology: Optional[str],
    group_name: Optional[str],
) -> torch.Tensor:
    x2 = _as_rows(x, gather_dim, "mercury.all_gather_matmul", "gather_dim")
    _check_w(x2, w, "mercury.all_gather_matmul")
    group = _group.by_name(group_name)
    world = 1 if group is None else torch.distributed.get_world_size(group)
    if world > 1:
        raise _distributed("mercury.all_gather_matmul", world)
    m, k = x2.shape
    n = w.shape[1]
    text = _mercury.gemm_commir(
        kind="all_gather", m=m * world, k=k, n=n * world, dtype=str(x.dtype), world=world
    )
    out = _run_world1(_compiled(text, schedule, topology), {"X": x2, "W": w}, "OUT")
    return out.reshape(*x.shape[:-1], n)


@_all_gather_matmul_op.register_fake
def _(x, w, gather_dim, schedule, topology, group_name):
    group = _group.by_name(group_name)
    world = 1 if group is None else torch.distributed.get_world_size(group)
    return x.new_empty((x.shape[0] * world, *x.shape[1:-1], w.shape[1]))


def _gemm_backward(ctx, grad):
    raise NotImplementedError(f"Mercury-rs's GEMM ops {_NO_BACKWARD}")


_all_gather_matmul_op.register_autograd(_gemm_backward, setup_context=_setup_none)


def all_gather_matmul(
    x_shard: torch.Tensor,
    w: torch.Tensor,
    *,
    group=None,
    gather_dim: int = 0,
    schedule: str = "auto",
    topology: Optional[str] = None,
) -> torch.Tensor:
    """``all_gather(x_shard, gather_dim) @ w``: the column-parallel linear after a
    sequence-parallel region (AsyncTP's ``fused_all_gather_matmul``).

    ``x_shard`` is this rank's block of rows (``gather_dim=0``; leading dimensions are folded
    into the rows), ``w`` this rank's ``[k, n_local]`` weight. Returns ``[world * rows, ...,
    n_local]``: every rank's rows times this rank's columns.
    """
    group_name = _agreed(group, "mercury.all_gather_matmul", x_shard, w, gather_dim)
    return _all_gather_matmul_op(x_shard, w, gather_dim, schedule, topology, group_name)


@torch.library.custom_op("mercury::matmul_reduce_scatter", mutates_args=())
def _matmul_reduce_scatter_op(
    x: torch.Tensor,
    w: torch.Tensor,
    scatter_dim: int,
    schedule: str,
    topology: Optional[str],
    group_name: Optional[str],
) -> torch.Tensor:
    x2 = _as_rows(x, scatter_dim, "mercury.matmul_reduce_scatter", "scatter_dim")
    _check_w(x2, w, "mercury.matmul_reduce_scatter")
    group = _group.by_name(group_name)
    world = 1 if group is None else torch.distributed.get_world_size(group)
    if world > 1:
        raise _distributed("mercury.matmul_reduce_scatter", world)
    m, k = x2.shape
    n = w.shape[1]
    text = _mercury.gemm_commir(
        kind="reduce_scatter", m=m, k=k * world, n=n, dtype=str(x.dtype), world=world
    )
    out = _run_world1(_compiled(text, schedule, topology), {"X": x2, "W": w}, "OUT")
    return out.reshape(x.shape[0] // world, *x.shape[1:-1], n)


@_matmul_reduce_scatter_op.register_fake
def _(x, w, scatter_dim, schedule, topology, group_name):
    group = _group.by_name(group_name)
    world = 1 if group is None else torch.distributed.get_world_size(group)
    return x.new_empty((x.shape[0] // world, *x.shape[1:-1], w.shape[1]))


_matmul_reduce_scatter_op.register_autograd(_gemm_backward, setup_context=_setup_none)


def matmul_reduce_scatter(
    x: torch.Tensor,
    w: torch.Tensor,
    *,
    group=None,
    scatter_dim: int = 0,
    schedule: str = "auto",
    topology: Optional[str] = None,
) -> torch.Tensor:
    """``reduce_scatter(x @ w, scatter_dim)``: the row-parallel linear before a
    sequence-parallel region (AsyncTP's ``fused_matmul_reduce_scatter``).

    ``x`` is ``[rows, ..., k_local]`` (this rank's block of the reduced dimension), ``w`` this
    rank's ``[k_local, n]``. Returns this rank's block of rows of the sum over ranks,
    ``[rows / world, ..., n]``.
    """
    group_name = _agreed(group, "mercury.matmul_reduce_scatter", x, w, scatter_dim)
    return _matmul_reduce_scatter_op(x, w, scatter_dim, schedule, topology, group_name)
