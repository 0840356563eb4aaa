"""Packed sequences (``mercury.varlen_attention``, flash-attn's ``flash_attn_varlen_func``) and
sliding windows (``window_size``) on the CPU executor against attention in float64 under a
mask built pair by pair (``conftest.varlen_mask``): forward, log-sum-exp and gradients, with
fresh random sequence lengths every run (one token each, one longer than half the batch, many
short and some empty), causal and not, one- and two-sided windows, grouped-query heads and a
value head dim of its own; one plan for every batch of lengths; and what is refused."""

import pytest
import torch
from conftest import fresh, masked64, prefix_sums, random_lengths, varlen_mask

import mercury
from mercury import _ops

TOL = dict(rtol=1e-9, atol=1e-12)

#: (causal, window_size): none, causal, a causal sliding window, one-sided look-back and
#: look-ahead windows, a two-sided window, and a causal window wider than any sequence.
MASKS = [
    (False, (-1, -1)),
    (True, (-1, -1)),
    (True, (3, -1)),
    (False, (2, -1)),
    (False, (-1, 1)),
    (False, (2, 3)),
    (True, (64, 5)),
]


def _check(q, k, v, cu_q, cu_k, causal, window, *, what):
    """Forward, lse and gradients of ``mercury.varlen_attention`` against the reference."""
    for t in (q, k, v):
        t.requires_grad_(True)
    mq = int((cu_q[1:] - cu_q[:-1]).max())
    mk = int((cu_k[1:] - cu_k[:-1]).max())
    o, lse = mercury.varlen_attention(
        q, k, v, cu_q, cu_k, mq, mk, causal=causal, window_size=window, return_lse=True
    )
    mask = varlen_mask(cu_q, cu_k, causal=causal, window=window)
    qr, kr, vr = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    want, want_lse = masked64(qr, kr, vr, mask)
    msg = f"{what}: cu_seqlens_q {cu_q.tolist()}, cu_seqlens_k {cu_k.tolist()}"
    assert o.shape == want.shape and lse.shape == want_lse.shape
    torch.testing.assert_close(o, want, **TOL, msg=lambda m: f"{msg}: out: {m}")
    torch.testing.assert_close(lse, want_lse, **TOL, msg=lambda m: f"{msg}: lse: {m}")
    do = fresh(*want.shape)
    want.backward(do)
    o.backward(do)
    for name, mine, ref in zip("qkv", (q, k, v), (qr, kr, vr), strict=True):
        torch.testing.assert_close(
            mine.grad, ref.grad, **TOL, msg=lambda m, name=name: f"{msg}: d{name}: {m}"
        )


@pytest.mark.parametrize("kind", ["one", "long", "many"])
@pytest.mark.parametrize(("causal", "window"), MASKS)
def test_self_attention_on_packed_sequences(causal, window, kind):
    total = 24
    cu = prefix_sums(random_lengths(total, kind))
    q, k, v = fresh(total, 4, 8), fresh(total, 2, 8), fresh(total, 2, 6)
    _check(q, k, v, cu, cu, causal, window, what=f"{kind}, causal={causal}, window={window}")


@pytest.mark.parametrize(
    ("causal", "window"), [(False, (-1, -1)), (True, (-1, -1)), (True, (2, -1)), (False, (1, 2))]
)
def test_other_key_lengths_align_at_the_bottom_right(causal, window):
    # Queries and keys of each sequence have lengths of their own (some with more queries
    # than keys: under causal their first rows see nothing), as flash-attn aligns them.
    lq, lk = [5, 1, 6, 0, 4], [2, 7, 6, 3, 6]
    perm = torch.randperm(len(lq)).tolist()
    cu_q, cu_k = prefix_sums([lq[i] for i in perm]), prefix_sums([lk[i] for i in perm])
    q, k, v = fresh(16, 2, 8), fresh(24, 2, 8), fresh(24, 2, 8)
    _check(q, k, v, cu_q, cu_k, causal, window, what=f"causal={causal}, window={window}")


def test_hundreds_of_sequences_one_plan_for_every_batch():
    total, before = 256, None
    q, k, v = fresh(total, 2, 4), fresh(total, 1, 4), fresh(total, 1, 4)
    for n in (200, 37, 1):
        cu = prefix_sums(_split(total, n))
        o = mercury.varlen_attention(q, k, v, cu, cu, total, total, causal=True)
        want, _ = masked64(q, k, v, varlen_mask(cu, cu, causal=True))
        torch.testing.assert_close(o, want, **TOL, msg=lambda m, cu=cu: f"{cu.tolist()}: {m}")
        # New boundaries, same plan: nothing recompiled.
        assert before is None or _ops.last_op is before
        before = _ops.last_op


def _split(total: int, n: int) -> list[int]:
    """``n`` fresh random positive lengths summing to ``total``."""
    points = sorted((torch.randperm(total - 1)[: n - 1] + 1).tolist())
    b = [0, *points, total]
    return [b[i + 1] - b[i] for i in range(n)]


def test_int64_boundaries_agree_with_int32():
    cu = prefix_sums([3, 9, 4])
    q = fresh(16, 2, 8)
    a = mercury.varlen_attention(q, q, q, cu, cu, 9, 9, causal=True)
    b = mercury.varlen_attention(q, q, q, cu.long(), cu.long(), 9, 9, causal=True)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(("causal", "window"), [(False, (3, 3)), (True, (4, -1)), (False, (-1, 0))])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_sliding_window_on_padded_batches(causal, window, layout):
    # mercury.attention's window_size: every batch entry one sequence of 16 tokens.
    q, k, v = fresh(2, 16, 4, 8), fresh(2, 16, 2, 8), fresh(2, 16, 2, 8)
    if layout == "bhsd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    for t in (q, k, v):
        t.requires_grad_(True)
    o = mercury.attention(q, k, v, causal=causal, window_size=window, layout=layout)
    cu = prefix_sums([16])
    mask = varlen_mask(cu, cu, causal=causal, window=window)
    thd = (lambda t: t.transpose(1, 2)) if layout == "bhsd" else (lambda t: t)
    do = fresh(*o.shape)
    o.backward(do)
    for b in range(2):
        qr, kr, vr = (thd(t)[b].detach().clone().requires_grad_(True) for t in (q, k, v))
        want, _ = masked64(qr, kr, vr, mask)
        torch.testing.assert_close(thd(o)[b], want, **TOL)
        want.backward(thd(do)[b])
        for mine, ref in zip((q, k, v), (qr, kr, vr), strict=True):
            torch.testing.assert_close(thd(mine.grad)[b], ref.grad, **TOL)


def test_compiled_operators_take_boundaries_by_name():
    # Any CommIR operator with `commir.documents`: op(**inputs) takes the prefix sums by name.
    text = """
commir.mesh @mesh shape [2] names ["gpu"]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f64 in sharding [R, S(0), R]
  commir.buffer @K : [@h, @j, 8] f64 in sharding [R, S(0), R]
  commir.buffer @V : [@h, @j, 8] f64 in sharding [R, S(0), R]
  commir.buffer @O : [@h, @i, 8] f64 out sharding [R, S(0), R]
  commir.documents @D positions 16
  %q = commir.load @Q[@h, @i] : !commir.tile<f64>
  %k = commir.load @K[@h, @j] : !commir.tile<f64>
  %v = commir.load @V[@h, @j] : !commir.tile<f64>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, documents = @D,
    window = [2, -1]} : (T, T, T) -> (T, T)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : T, T
}
""".replace("T", "!commir.tile<f64>")
    op = mercury.compile(text, schedule="shift-shard")
    assert op.documents == {"D": 16}
    q, k, v = fresh(2, 16, 8), fresh(2, 16, 8), fresh(2, 16, 8)
    lengths = random_lengths(16, "many")
    cu = prefix_sums(lengths)
    got = op(Q=q, K=k, V=v, D=cu)["O"]
    want, _ = masked64(
        *(t.transpose(0, 1) for t in (q, k, v)), varlen_mask(cu, cu, causal=True, window=(2, -1))
    )
    torch.testing.assert_close(got.transpose(0, 1), want, **TOL)
    with pytest.raises(ValueError, match="document boundaries 'D' are missing"):
        op(Q=q, K=k, V=v)
    with pytest.raises(ValueError, match="'D'.*decrease at entry 2"):
        op(Q=q, K=k, V=v, D=[0, 9, 4, 16])
    with pytest.raises(TypeError, match="'D' must be a 1-D integer tensor"):
        op(Q=q, K=k, V=v, D=cu.double())


def _call(**over):
    cu = prefix_sums([3, 5, 8])
    args = dict(
        q=fresh(16, 2, 8),
        k=fresh(16, 2, 8),
        v=fresh(16, 2, 8),
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
        max_seqlen_q=8,
        max_seqlen_k=8,
    )
    args.update(over)
    return mercury.varlen_attention(**args)


@pytest.mark.parametrize(
    ("over", "error", "match"),
    [
        (dict(dropout_p=0.1), ValueError, r"dropout_p=0.1: attention dropout"),
        (dict(softcap=30.0), ValueError, r"softcap=30.0"),
        (dict(alibi_slopes=torch.ones(2)), ValueError, r"alibi_slopes"),
        (dict(return_attn_probs=True), ValueError, r"return_attn_probs=True.*return_lse"),
        (dict(block_table=torch.zeros(1, 1)), ValueError, r"block_table"),
        (
            dict(cu_seqlens_q=torch.tensor([1, 8, 16], dtype=torch.int32)),
            ValueError,
            r"cu_seqlens_q starts at 1, not 0",
        ),
        (
            dict(cu_seqlens_k=torch.tensor([0, 9, 8, 16], dtype=torch.int32)),
            ValueError,
            r"cu_seqlens_k decreases at entry 2 \(8 after 9\)",
        ),
        (
            dict(cu_seqlens_q=torch.tensor([0, 8, 12], dtype=torch.int32)),
            ValueError,
            r"cu_seqlens_q ends at 12 but there are 16 tokens",
        ),
        (
            dict(cu_seqlens_q=torch.tensor([0, 8, 16], dtype=torch.int32)),
            ValueError,
            r"cu_seqlens_q holds 2 sequences and cu_seqlens_k 3",
        ),
        (dict(cu_seqlens_q=torch.tensor([0.0, 16.0])), TypeError, r"cu_seqlens_q must be int32"),
        (dict(cu_seqlens_k=[0, 16]), TypeError, r"cu_seqlens_k must be a torch.Tensor"),
        (
            dict(cu_seqlens_q=torch.tensor([0], dtype=torch.int32)),
            ValueError,
            r"cu_seqlens_q has 1 entries",
        ),
        (dict(max_seqlen_q=7), ValueError, r"max_seqlen_q=7 but the longest sequence has 8 tokens"),
        (
            dict(max_seqlen_k=torch.tensor(8)),
            TypeError,
            r"max_seqlen_k must be an int \(\.item\(\) of a tensor\)",
        ),
        (dict(window_size=(-2, 0)), ValueError, r"window_size \(-2, 0\): each side"),
        (dict(window_size=(1, 2, 3)), TypeError, r"window_size must be a pair of ints"),
        (dict(window_size=(1.5, 0)), TypeError, r"window_size must be a pair of ints"),
        (
            dict(q=fresh(1, 16, 2, 8)),
            ValueError,
            r"q must be 3-D \[total_tokens, heads, head_dim\]",
        ),
        (
            dict(k=fresh(16, 3, 8), v=fresh(16, 3, 8)),
            ValueError,
            r"grouped-query attention needs a multiple",
        ),
        (dict(v=fresh(12, 2, 8)), ValueError, r"k has 16 tokens but v 12"),
        (dict(balance="stripe"), ValueError, r"balance must be None or 'zigzag'"),
    ],
)
def test_refusals_name_the_argument(over, error, match):
    with pytest.raises(error, match=match):
        _call(**over)


def test_attention_window_refusals():
    q = fresh(1, 8, 2, 4)
    with pytest.raises(ValueError, match=r"window_size \(3, -4\)"):
        mercury.attention(q, q, q, window_size=(3, -4))
    with pytest.raises(TypeError, match="window_size must be a pair of ints"):
        mercury.attention(q, q, q, window_size=4)


def test_under_torch_compile():
    # The custom op traces; the boundaries stay tensors (new lengths: no recompile).
    cu = prefix_sums([5, 11])
    q = fresh(16, 2, 8)
    f = torch.compile(
        lambda q, cu: mercury.varlen_attention(q, q, q, cu, cu, 16, 16, causal=True),
        backend="eager",
        fullgraph=True,
    )
    for lengths in ([5, 11], [1, 15], [16, 0]):
        cu = prefix_sums(lengths)
        want, _ = masked64(q, q, q, varlen_mask(cu, cu, causal=True))
        torch.testing.assert_close(f(q, cu), want, **TOL)


def test_gradients_under_torch_compile_aot():
    # AOTAutograd traces the backward graph (as inductor does): the masked backward is an op
    # of its own, traced opaque, and run on the boundaries of each call.
    q, k, v = (fresh(32, 2, 8).requires_grad_() for _ in range(3))

    def block(q, k, v, cu):
        return (mercury.varlen_attention(q, k, v, cu, cu, 32, 32, causal=True) * 3).sum()

    f = torch.compile(block, backend="aot_eager", fullgraph=True)
    for lengths in ([5, 7, 20], [32]):
        cu = prefix_sums(lengths)
        got = torch.autograd.grad(f(q, k, v, cu), (q, k, v))
        want = torch.autograd.grad(block(q, k, v, cu), (q, k, v))
        for a, b_ in zip(got, want, strict=True):
            torch.testing.assert_close(a, b_, **TOL)


def test_cuda_runs_hand_their_boundaries_to_the_executor_before_the_launch():
    # On CUDA tensors the binding sets the run's boundaries on the executor (which refills its
    # masked blocks' row bounds) before it binds and launches anything.
    from mercury import _cuda

    class Stop(Exception):
        pass

    seen = []

    class Native:
        def set_documents(self, docs):
            seen.append(docs)
            raise Stop

    class Runner:
        native = Native()
        names, outputs = [], []

    with pytest.raises(Stop):
        _cuda.run_bound(object(), {}, {}, torch.device("cuda", 0), Runner(), {"D": [0, 3, 4]})
    assert seen == [[("D", [0, 3, 4])]]
