"""The distributed operators: attention, all-gather GEMM, GEMM reduce-scatter.

Each call compiles the operator for its shapes, dtype, world size and schedule once
(``schedule="auto"``: the search's pick, through the schedule cache) and keeps it with its
executor: a later call with the same signature binds the tensors' addresses and launches, and
nothing more. In eager mode the call goes straight to that path (autograd through
``torch.autograd.Function`` when a gradient is wanted); under ``torch.compile`` it is the
custom op ``torch.ops.mercury.*`` (with a fake implementation), which traces.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Optional

import torch
import torch.distributed as dist

from . import _cuda, _group, _mask, _mercury, _sequence
from ._call import Call
from ._compile import Op, compile

_LAYOUTS = ("bshd", "bhsd")


def synchronize() -> None:
    """Waits for every run Mercury-rs launched and for the current CUDA stream; a fault of a
    run (a device error, a stall past the stage deadline, an NCCL error) is raised here as
    ``RuntimeError`` if the next call of its operator has not raised it already. Without
    CUDA, nothing to wait for."""
    _cuda.synchronize()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.current_stream().synchronize()


@functools.lru_cache(maxsize=256)
def _compiled(text: str, schedule: str, topology: Optional[str]) -> Op:
    return compile(text, schedule=schedule, topology=topology)


#: The compiled operator of the last call (its ``last_device_ms``: the executor's device time).
last_op: Optional[Op] = None

#: Prepared calls by signature (shapes, dtypes, devices, options, group).
_calls: dict = {}

#: ``mercury.attention``'s signatures at world size 1 on CUDA tensors whose executor is built:
#: a call with one of them, eager and without a gradient, goes straight to
#: :meth:`_Attention.forward_world1` (docs/perf.md, "The Python entry": the host time of a call).
_world1: dict = {}


def _call(key, make) -> Call:
    if _group.new_world():
        # Group names repeat under a new default group: nothing prepared under the old one.
        _calls.clear()
        _world1.clear()
        _cuda.forget_groups()
    c = _calls.get(key)
    if c is None:
        if len(_calls) > 1024:
            _calls.clear()
        c = _calls[key] = make()
    return c


def _run(c: Call, inputs: dict, outputs: dict, documents: Optional[dict] = None) -> None:
    global last_op
    last_op = c.op
    c.run(inputs, outputs, documents)


def _poison() -> bool:
    """``MERCURY_POISON_OUTPUTS=1``: outputs the package allocates start as NaN (the tests set
    it), so that an element the executor does not write shows."""
    return os.environ.get("MERCURY_POISON_OUTPUTS", "") not in ("", "0")


def _empty(like: torch.Tensor, shape, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """An output tensor of ``shape`` on ``like``'s device (NaN-filled when poisoning)."""
    dtype = like.dtype if dtype is None else dtype
    if _poison():
        return like.new_full(shape, math.nan, dtype=dtype)
    return like.new_empty(shape, dtype=dtype)


def _world(group_name: Optional[str]) -> int:
    group = _group.by_name(group_name)
    return 1 if group is None else dist.get_world_size(group)


def _eager() -> bool:
    """Not under torch.compile's tracing: the direct path (no custom-op dispatch)."""
    return not torch.compiler.is_compiling()


# --- attention -------------------------------------------------------------------------------


def _attention_shapes(q, k, v, layout, cross: bool = False):
    """``(batch, q tokens, q heads, kv heads, head dim, v head dim, kv tokens)`` of this rank's
    tensors, or ``ValueError``/``TypeError`` naming what does not fit; ``cross``: k and v may
    have another number of tokens than q (varlen attention)."""
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
        if t.shape[0] != b or (not cross and t.shape[s_dim] != s):
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but q {tuple(q.shape)}: batch and sequence "
                f"({layout}) must agree"
            )
    if v.shape[s_dim] != k.shape[s_dim]:
        raise ValueError(f"k has {k.shape[s_dim]} tokens but v {v.shape[s_dim]}: they pair up")
    hk = k.shape[h_dim]
    if v.shape[h_dim] != hk:
        raise ValueError(f"k has {hk} heads but v {v.shape[h_dim]} ({layout})")
    if k.shape[3] != d:
        raise ValueError(f"q's head dim is {d} but k's {k.shape[3]}: q.k needs them equal")
    if hq % hk != 0:
        raise ValueError(
            f"q has {hq} heads, k and v {hk}: grouped-query attention needs a multiple"
        )
    return b, s, hq, hk, d, v.shape[3], k.shape[s_dim]


def attention_shardings(balance: Optional[str]) -> dict:
    """Sharding of every buffer of the attention operators (forward and backward): the
    sequence (dimension 2 of the bhsd buffers), in blocks or ring-flash-attn's zigzag (once, or
    over chunks: ``balance`` as :func:`mercury._sequence.layout` gives it)."""
    kind = balance or "block"
    return {n: (2, kind) for n in ("Q", "K", "V", "O", "L", "dO", "dQ", "dK", "dV")}


def _lse_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


#: The options of an attention call besides its tensors: ``(causal, softmax_scale, layout,
#: balance, schedule, topology, group_name, window)``, ``window`` flash-attn's ``window_size``
#: checked (:func:`_mask.window`: None or a pair).
Options = tuple


def _options(causal, scale, layout, balance, schedule, topology, group_name, window) -> Options:
    """:data:`Options` from the custom ops' arguments (``window`` a list there, a tuple here)."""
    window = None if window is None else tuple(window)
    return (causal, scale, layout, balance, schedule, topology, group_name, window)


class _Attention:
    """An attention signature: its forward call (with or without the log-sum-exp output) and,
    built on first use, its backward call. ``documents``: ``"none"``, ``"shared"`` (boundaries
    ``D``) or ``"split"`` (``Dq``, ``Dk``), whose values come with each run (one plan for every
    batch of documents)."""

    def __init__(self, q, k, v, opts: Options, lse: bool, documents: str):
        causal, scale, layout, balance, schedule, topology, group_name, window = opts
        b, s, hq, hk, d, dv, sk = _attention_shapes(q, k, v, layout, documents == "split")
        world = _world(group_name)
        zigzag, chunk = _sequence.parse(balance)
        self.spec = dict(
            batch=b,
            heads=hq,
            kv_heads=hk,
            seq=s * world,
            kv_seq=sk * world,
            window=window,
            documents=documents,
            head_dim=d,
            v_head_dim=dv,
            causal=causal,
            scale=scale,
            dtype=str(q.dtype),
            world=world,
            zigzag=zigzag,
            zigzag_chunk=chunk,
        )
        self.balance = balance
        self.topology = topology
        self.group_name = group_name
        self.local = (b, hq, s, dv)
        self.bshd = layout == "bshd"
        #: The GPU of CUDA tensors at world size 1 (the executor's, :meth:`forward_world1`).
        self.ordinal = (
            (q.device.index if q.device.index is not None else torch.cuda.current_device())
            if q.is_cuda and world == 1
            else None
        )
        text, self.bwd_schedule = _mercury.attention_commir(**self.spec, lse=lse)
        self.fwd = Call(_compiled(text, schedule, topology), group_name, self._shardings())
        self._bwd: Optional[Call] = None

    def _shardings(self) -> dict:
        return attention_shardings(self.balance)

    def bwd(self) -> Call:
        if self._bwd is None:
            text, _ = _mercury.attention_commir(**self.spec, backward=True)
            op = _compiled(text, self.bwd_schedule, self.topology)
            self._bwd = Call(op, self.group_name, self._shardings())
        return self._bwd

    def bhsd(self, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(1, 2) if self.bshd else t

    def empty(self, like: torch.Tensor, dv: int) -> torch.Tensor:
        """A tensor of q's layout for an output of head dim ``dv``, as its buffer (bhsd)."""
        b, h, s, _ = self.local
        shape = (b, s, h, dv) if self.bshd else (b, h, s, dv)
        return _empty(like, shape)

    def forward(self, q, k, v, lse: bool, bounds: Optional[dict] = None):
        """``bounds``: the document boundaries by input name (``documents`` not "none")."""
        b, hq, s, dv = self.local
        o = self.empty(q, dv)
        outs = {"O": self.bhsd(o)}
        lse_t = _empty(q, (b, hq, s), _lse_dtype(q.dtype)) if lse else None
        if lse:
            outs["L"] = lse_t
        ins = {"Q": self.bhsd(q), "K": self.bhsd(k), "V": self.bhsd(v)}
        _run(self.fwd, ins, outs, bounds)
        return o, lse_t

    def forward_world1(self, q, k, v, lse: bool):
        """:meth:`forward` at world size 1 on CUDA tensors once the executor is built (a
        cached shape): the outputs allocated, the tensors bound, the run launched."""
        b, hq, s, dv = self.local
        o = self.empty(q, dv)
        lse_t = _empty(q, (b, hq, s), _lse_dtype(q.dtype)) if lse else None
        op = self.fwd.op
        r = op._runners[self.ordinal]
        by_name = {"Q": self.bhsd(q), "K": self.bhsd(k), "V": self.bhsd(v), "O": self.bhsd(o)}
        if lse:
            by_name["L"] = lse_t
        r.launch_named(by_name, self.ordinal)
        global last_op
        last_op, op._last_runner = op, r
        return o, lse_t

    def backward(self, q, k, v, o, lse, do, bounds: Optional[dict] = None):
        dq, dk, dv = (_empty(x, x.shape) for x in (q, k, v))
        ins = {"Q": q, "K": k, "V": v, "O": o, "dO": do}
        ins = {n: self.bhsd(t) for n, t in ins.items()}
        ins["L"] = lse
        outs = {"dQ": self.bhsd(dq), "dK": self.bhsd(dk), "dV": self.bhsd(dv)}
        _run(self.bwd(), ins, outs, bounds)
        return dq, dk, dv


def _attention_of(q, k, v, opts: Options, lse: bool, cu_q, cu_k):
    """The prepared signature of a call and its document boundaries by input name."""
    layout, group_name = opts[2], opts[6]
    documents, bounds = _mask.documents(q, k, layout, _world(group_name), cu_q, cu_k)
    key = ("attention", q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device,
           k.device, v.device, opts, lse, documents)  # fmt: skip
    return _call(key, lambda: _Attention(q, k, v, opts, lse, documents)), bounds


def _attention_fwd(q, k, v, cu_q, cu_k, opts: Options, lse: bool):
    a, bounds = _attention_of(q, k, v, opts, lse, cu_q, cu_k)
    return a.forward(q, k, v, lse, bounds)


def _attention_bwd(opts: Options, saved, do):
    q, k, v, o, lse, cu_q, cu_k = saved
    a, bounds = _attention_of(q, k, v, opts, True, cu_q, cu_k)
    return a.backward(q, k, v, o, lse, _dense(do), bounds)


#: What differentiating a gradient of a mercury op raises (``create_graph=True``, then a
#: backward through the gradient): the backward operators are not differentiable, and a
#: gradient that silently lacked their part would be wrong.
DOUBLE_BACKWARD = (
    "{what}: a gradient of its gradient (double backward: create_graph=True, then a backward "
    "through the gradient) is not computed"
)


class _NoDoubleBackward(torch.autograd.Function):
    """Passes the first ``n`` tensors through, tied to the rest (what they depend on: the
    saved inputs, the incoming gradients); a backward through them raises
    ``NotImplementedError``."""

    @staticmethod
    def forward(ctx, what, n, *tensors):
        ctx.what = what
        return tuple(t.view_as(t) for t in tensors[:n])

    @staticmethod
    def backward(ctx, *_):
        raise NotImplementedError(DOUBLE_BACKWARD.format(what=ctx.what))


def _first_order(what: str):
    """A backward computed without autograd; under ``create_graph=True`` its gradients come
    back tied to what they depend on (the saved inputs, the incoming gradients) so that
    differentiating them raises: never a silently partial second-order gradient."""

    def wrap(backward):
        @functools.wraps(backward)
        def run(ctx, *grads):
            with torch.no_grad():
                out = backward(ctx, *grads)
            if not torch.is_grad_enabled():
                return out
            deps = [
                t
                for t in (*grads, *ctx.saved_tensors)
                if isinstance(t, torch.Tensor) and t.requires_grad
            ]
            at = [i for i, g in enumerate(out) if isinstance(g, torch.Tensor)]
            if not deps or not at:
                return out
            marked = _NoDoubleBackward.apply(what, len(at), *(out[i] for i in at), *deps)
            out = list(out)
            for i, g in zip(at, marked, strict=True):
                out[i] = g
            return tuple(out)

        return run

    return wrap


#: What a backward through the returned log-sum-exp raises (eager): its gradient is not
#: computed, and dropping it silently would give wrong gradients.
LSE_GRADIENT = (
    "mercury.attention: the loss reaches the returned log-sum-exp, whose gradient is not "
    "computed (only the output's is); use lse.detach() where it enters the loss"
)


class _AttentionFunction(torch.autograd.Function):
    """Eager autograd: the forward keeps its log-sum-exp; the backward runs the backward
    operator (``"none"`` at world size 1, else ``shift-shard``: the ring backward) with the
    forward's mask and document boundaries."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, opts):
        o, lse = _attention_fwd(q, k, v, cu_q, cu_k, opts, True)
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
        ctx.opts = opts
        # Gradients of unused outputs stay None: one through the lse is seen, and refused.
        ctx.set_materialize_grads(False)
        return o, lse

    @staticmethod
    @_first_order("mercury.attention")
    def backward(ctx, do, dlse):
        if dlse is not None:
            raise NotImplementedError(LSE_GRADIENT)
        if do is None:
            return None, None, None, None, None, None
        dq, dk, dv = _attention_bwd(ctx.opts, ctx.saved_tensors, do)
        return dq, dk, dv, None, None, None


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
    return_lse: bool,
    window: Optional[list[int]] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    opts = _options(causal, softmax_scale, layout, balance, schedule, topology, group_name, window)
    o, lse = _attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, opts, return_lse)
    return o, (lse if lse is not None else q.new_empty((0,), dtype=_lse_dtype(q.dtype)))


@_attention_op.register_fake
def _(q, k, v, causal, softmax_scale, layout, balance, schedule, topology, group_name, return_lse,
      window=None, cu_seqlens_q=None, cu_seqlens_k=None):  # fmt: skip
    b, s, hq, _, _, dv, _ = _attention_shapes(q, k, v, layout, cu_seqlens_q is not None)
    shape = (b, s, hq, dv) if layout == "bshd" else (b, hq, s, dv)
    lse = (b, hq, s) if return_lse else (0,)
    return q.new_empty(shape), q.new_empty(lse, dtype=_lse_dtype(q.dtype))


def _attention_setup(ctx, inputs, output):
    q, k, v, *opts, return_lse, window, cu_q, cu_k = inputs
    ctx.opts = (*opts, None if window is None else tuple(window))
    ctx.with_lse = return_lse
    ctx.save_for_backward(q, k, v, *output, cu_q, cu_k)


@_first_order("mercury.attention")
def _attention_op_backward(ctx, do, _dlse):
    if not ctx.with_lse:
        raise RuntimeError(
            "torch.ops.mercury.attention was traced without its log-sum-exp (return_lse=False) "
            "but a gradient is wanted: call mercury.attention, which asks for it when any input "
            "requires grad"
        )
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    *opts, window = ctx.opts
    dq, dk, dv = _attention_backward_op(
        q, k, v, o, lse, _dense(do), *opts, None if window is None else list(window), cu_q, cu_k
    )
    return (dq, dk, dv) + (None,) * 11


@torch.library.custom_op("mercury::attention_backward", mutates_args=())
def _attention_backward_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    causal: bool,
    softmax_scale: Optional[float],
    layout: str,
    balance: Optional[str],
    schedule: str,
    topology: Optional[str],
    group_name: Optional[str],
    window: Optional[list[int]] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward of ``mercury::attention`` as an op of its own (opaque to torch.compile's
    tracing of the backward graph, which must not run the executor on fake tensors):
    ``(dq, dk, dv)`` in q's, k's and v's layouts."""
    opts = _options(causal, softmax_scale, layout, balance, schedule, topology, group_name, window)
    return _attention_bwd(opts, (q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k), do)


@_attention_backward_op.register_fake
def _(q, k, v, o, lse, do, *_args, **_kwargs):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


_attention_op.register_autograd(_attention_op_backward, setup_context=_attention_setup)


def _check_args(q, k, v, causal, softmax_scale) -> None:
    """``TypeError`` naming the argument for tensors that are not tensors, a ``causal`` that is
    not a bool and a ``softmax_scale`` that is not a number (a one-element tensor is taken
    through :func:`_scale` first)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, not {type(causal).__name__} {causal!r}")
    if softmax_scale is not None and (
        isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float))
    ):
        raise TypeError(
            f"softmax_scale must be a number (or None: 1/sqrt(head_dim)), not "
            f"{type(softmax_scale).__name__} {softmax_scale!r}"
        )


def _scale(softmax_scale):
    """``softmax_scale`` as a Python float when given as a one-element tensor (so that the
    compiled operator is found again by its value, not the tensor's identity)."""
    if isinstance(softmax_scale, torch.Tensor) and softmax_scale.numel() == 1:
        return float(softmax_scale.item())
    return softmax_scale


def attention_entry(
    q,
    k,
    v,
    cu_q,
    cu_k,
    *,
    what,
    causal,
    softmax_scale,
    layout,
    group,
    balance,
    schedule,
    return_lse,
    topology,
    window,
    signature=(),
):
    """The one path of :func:`attention` and :func:`mercury.varlen_attention`: checks, the
    ranks' agreement (on ``signature`` too), then the custom op (under torch.compile), the
    autograd function (a gradient wanted) or the forward alone. ``balance`` is a layout as
    :func:`mercury._sequence.layout` returns it (checked by the callers)."""
    _check_args(q, k, v, causal, softmax_scale)
    world, _, group_name = _group.resolve(group)
    if world > 1 or _sequence.parse(balance)[1] is not None:
        _, s, _, _, _, _, sk = _attention_shapes(q, k, v, layout, cu_q is not None)
    if _sequence.parse(balance)[1] is not None:
        # Whole rounds of chunks over the group: said here, naming chunk_size and the call.
        for side, n in (("query", s * world), ("key/value", sk * world)):
            _sequence.runs(n, world, 0, balance, f"{what}: the {side} sequence")
    if world > 1:
        _group.check_same_across_ranks(
            _group.by_name(group_name),
            what,
            (
                tuple(q.shape),
                tuple(k.shape),
                tuple(v.shape),
                str(q.dtype),
                q.device.type,
                causal,
                softmax_scale,
                layout,
                _sequence.describe(balance),
                schedule,
                return_lse,
                window,
                *signature,
            ),
        )
    opts = (causal, softmax_scale, layout, balance, schedule, topology, group_name, window)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if not _eager():
        w = None if window is None else list(window)
        o, lse = _attention_op(q, k, v, *opts[:-1], return_lse or grad, w, cu_q, cu_k)
    elif grad:
        o, lse = _AttentionFunction.apply(q, k, v, cu_q, cu_k, opts)
    else:
        o, lse = _attention_fwd(q, k, v, cu_q, cu_k, opts, return_lse)
    return o, lse


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
    window_size: tuple[int, int] = (-1, -1),
    chunk_size: Optional[int] = None,
):
    """Softmax attention over a sequence sharded across ``group``: this rank's output shard.

    ``q, k, v`` are this rank's sequence shard, ``[batch, seq_local, heads, head_dim]`` for
    ``layout="bshd"`` (flash-attn's) or ``[batch, heads, seq_local, head_dim]`` for ``"bhsd"``;
    k and v may have fewer heads than q (grouped-query attention: a divisor) and v its own head
    dim (MLA). ``causal`` masks key positions after the query's in the whole sequence;
    ``window_size=(left, right)`` (flash-attn's sliding window) lets query ``i`` see keys
    ``i - left`` to ``i + right`` only, ``-1`` unbounded on that side (with ``causal`` the right
    side is 0). ``softmax_scale`` defaults to ``1/sqrt(head_dim)``. ``balance="zigzag"``: the
    shards are laid out as :func:`mercury.shard_sequence` with ``balance="zigzag"`` (and the same
    ``chunk_size``: the zigzag over chunks of that many positions) makes them.
    ``group`` defaults to the world group (world size 1 without torch.distributed). ``schedule``
    as in :func:`mercury.compile`. Returns the output in q's layout and dtype, and with
    ``return_lse=True`` also the log-sum-exp ``[batch, heads, seq_local]`` (float32; float64
    for float64 inputs): the natural log of each query row's sum of ``exp(scale q.k)`` over the
    keys it sees (flash-attn's ``softmax_lse``). Differentiable in q, k and v. Packed sequences
    (flash-attn's ``cu_seqlens``): :func:`mercury.varlen_attention`.
    """
    # A cached shape at world size 1 on CUDA, eager, no gradient: straight to the executor.
    softmax_scale = _scale(softmax_scale)
    balance = _sequence.layout(balance, chunk_size)
    _check_args(q, k, v, causal, softmax_scale)
    fast = None
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if q.is_cuda and group is None and type(window_size) is tuple and not grad and _eager():
        if not _group.distributed():
            fast = (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device, k.device,
                    v.device, causal, softmax_scale, layout, balance, schedule, return_lse,
                    topology, window_size)  # fmt: skip
            a = _world1.get(fast)
            if a is not None:
                o, lse = a.forward_world1(q, k, v, return_lse)
                return (o, lse) if return_lse else o
    window = _mask.window(window_size)
    o, lse = attention_entry(q, k, v, None, None, what="mercury.attention", causal=causal,
                             softmax_scale=softmax_scale, layout=layout, group=group,
                             balance=balance, schedule=schedule, return_lse=return_lse,
                             topology=topology, window=window)  # fmt: skip
    if fast is not None:
        opts = (causal, softmax_scale, layout, balance, schedule, topology, None, window)
        a, _ = _attention_of(q, k, v, opts, return_lse, None, None)
        if a.ordinal is not None and a.ordinal in a.fwd.op._runners:
            if len(_world1) > 256:
                _world1.clear()
            _world1[fast] = a
    return (o, lse) if return_lse else o


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
        signature = (tuple(x.shape), tuple(w.shape), str(x.dtype), x.device.type, dim)
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


#: Sharding of X, W, OUT: AsyncTP's all-gather GEMM (X rows, W and OUT columns) and GEMM
#: reduce-scatter (X columns, W rows, OUT rows).
_GEMM_SHARDINGS = {
    "all_gather": {"X": (0, "block"), "W": (1, "block"), "OUT": (1, "block")},
    "reduce_scatter": {"X": (1, "block"), "W": (0, "block"), "OUT": (0, "block")},
}


def _gemm(kind: str, x2, w, schedule, topology, group_name) -> torch.Tensor:
    """``kind``'s GEMM on this rank's 2-D ``x2`` and ``w``: this rank's 2-D output."""
    world = _world(group_name)
    m, k = x2.shape
    n = w.shape[1]
    key = (
        "gemm",
        kind,
        x2.shape,
        w.shape,
        x2.dtype,
        w.dtype,
        x2.device,
        w.device,
        schedule,
        topology,
        group_name,
    )

    def make():
        dims = (
            dict(m=m * world, k=k, n=n * world)
            if kind == "all_gather"
            else dict(m=m, k=k * world, n=n)
        )
        text = _mercury.gemm_commir(kind=kind, dtype=str(x2.dtype), world=world, **dims)
        return Call(_compiled(text, schedule, topology), group_name, _GEMM_SHARDINGS[kind])

    c = _call(key, make)
    rows = m * world if kind == "all_gather" else m // world
    out = _empty(x2, (rows, n))
    _run(c, {"X": x2, "W": w}, {"OUT": out})
    return out


def _all_gather(t: torch.Tensor, group_name: Optional[str]) -> torch.Tensor:
    """Every rank's ``t`` stacked along dimension 0."""
    group = _group.by_name(group_name)
    if group is None or dist.get_world_size(group) == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, 0)


class _AllGatherMatmul(torch.autograd.Function):
    """``out = all_gather(x) @ w``: ``dx = reduce_scatter(dout @ w^T)`` (the GEMM
    reduce-scatter), ``dw = all_gather(x)^T @ dout``."""

    @staticmethod
    def forward(ctx, x2, w, schedule, topology, group_name):
        ctx.save_for_backward(x2, w)
        ctx.args = (schedule, topology, group_name)
        return _gemm("all_gather", x2, w, schedule, topology, group_name)

    @staticmethod
    @_first_order("mercury.all_gather_matmul")
    def backward(ctx, dout):
        x2, w = ctx.saved_tensors
        schedule, topology, group_name = ctx.args
        dout = _dense(dout)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = _gemm("reduce_scatter", dout, w.t(), schedule, topology, group_name)
        if ctx.needs_input_grad[1]:
            dw = _all_gather(x2, group_name).t() @ dout
        return dx, dw, None, None, None


class _MatmulReduceScatter(torch.autograd.Function):
    """``out = reduce_scatter(x @ w)``: ``dx = all_gather(dout) @ w^T`` (the all-gather GEMM),
    ``dw = x^T @ all_gather(dout)``."""

    @staticmethod
    def forward(ctx, x2, w, schedule, topology, group_name):
        ctx.save_for_backward(x2, w)
        ctx.args = (schedule, topology, group_name)
        return _gemm("reduce_scatter", x2, w, schedule, topology, group_name)

    @staticmethod
    @_first_order("mercury.matmul_reduce_scatter")
    def backward(ctx, dout):
        x2, w = ctx.saved_tensors
        schedule, topology, group_name = ctx.args
        dout = _dense(dout)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = _gemm("all_gather", dout, w.t(), schedule, topology, group_name)
        if ctx.needs_input_grad[1]:
            dw = x2.t() @ _all_gather(dout, group_name)
        return dx, dw, None, None, None


def _gemm_call(kind, fn, x, w, dim, schedule, topology, group_name, what, arg):
    x2 = _as_rows(x, dim, what, arg)
    _check_w(x2, w, what)
    rows = _rows(kind, x, group_name)
    grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
    if not _eager():
        op = _all_gather_matmul_op if kind == "all_gather" else _matmul_reduce_scatter_op
        return op(x, w, dim, schedule, topology, group_name)
    out = (
        fn.apply(x2, w, schedule, topology, group_name)
        if grad
        else _gemm(kind, x2, w, schedule, topology, group_name)
    )
    return out.reshape(rows, *x.shape[1:-1], w.shape[1])


def _rows(kind: str, x: torch.Tensor, group_name: Optional[str]) -> int:
    """Dimension 0 of the output: every rank's rows, or this rank's block of them."""
    world = _world(group_name)
    if kind == "all_gather":
        return x.shape[0] * world
    if x.shape[0] % world:
        raise ValueError(
            f"mercury.matmul_reduce_scatter: dimension 0 of x ({x.shape[0]}) does not split "
            f"into {world} equal blocks"
        )
    return x.shape[0] // world


def _dense(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy when it has a zero stride (an expanded gradient such as ``sum()``'s)."""
    return t.contiguous() if 0 in t.stride() else t


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
    out = _gemm("all_gather", x2, w, schedule, topology, group_name)
    return out.reshape(_rows("all_gather", x, group_name), *x.shape[1:-1], w.shape[1])


@_all_gather_matmul_op.register_fake
def _(x, w, gather_dim, schedule, topology, group_name):
    return x.new_empty((x.shape[0] * _world(group_name), *x.shape[1:-1], w.shape[1]))


def _ag_setup(ctx, inputs, output):
    x, w, _, schedule, topology, group_name = inputs
    ctx.save_for_backward(x, w)
    ctx.args = (schedule, topology, group_name)


@_first_order("mercury.all_gather_matmul")
def _ag_backward(ctx, dout):
    x, w = ctx.saved_tensors
    schedule, topology, group_name = ctx.args
    x2, d2 = x.reshape(-1, x.shape[-1]), _dense(dout).reshape(-1, dout.shape[-1])
    dx = _matmul_reduce_scatter_op(d2, w.t().contiguous(), 0, schedule, topology, group_name)
    dw = _all_gather(x2, group_name).t() @ d2
    return dx.reshape(x.shape), dw, None, None, None, None


_all_gather_matmul_op.register_autograd(_ag_backward, setup_context=_ag_setup)


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
    n_local]``: every rank's rows times this rank's columns. Differentiable in x and w.
    """
    what = "mercury.all_gather_matmul"
    group_name = _agreed(group, what, x_shard, w, gather_dim)
    return _gemm_call(
        "all_gather",
        _AllGatherMatmul,
        x_shard,
        w,
        gather_dim,
        schedule,
        topology,
        group_name,
        what,
        "gather_dim",
    )


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
    out = _gemm("reduce_scatter", x2, w, schedule, topology, group_name)
    return out.reshape(_rows("reduce_scatter", x, group_name), *x.shape[1:-1], w.shape[1])


@_matmul_reduce_scatter_op.register_fake
def _(x, w, scatter_dim, schedule, topology, group_name):
    return x.new_empty((x.shape[0] // _world(group_name), *x.shape[1:-1], w.shape[1]))


@_first_order("mercury.matmul_reduce_scatter")
def _rs_backward(ctx, dout):
    x, w = ctx.saved_tensors
    schedule, topology, group_name = ctx.args
    x2, d2 = x.reshape(-1, x.shape[-1]), _dense(dout).reshape(-1, dout.shape[-1])
    dx = _all_gather_matmul_op(d2, w.t().contiguous(), 0, schedule, topology, group_name)
    dw = x2.t() @ _all_gather(d2, group_name)
    return dx.reshape(x.shape), dw, None, None, None, None


_matmul_reduce_scatter_op.register_autograd(_rs_backward, setup_context=_ag_setup)


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
    ``[rows / world, ..., n]``. Differentiable in x and w.
    """
    what = "mercury.matmul_reduce_scatter"
    group_name = _agreed(group, what, x, w, scatter_dim)
    return _gemm_call(
        "reduce_scatter",
        _MatmulReduceScatter,
        x,
        w,
        scatter_dim,
        schedule,
        topology,
        group_name,
        what,
        "scatter_dim",
    )
