"""The distributed operators at world size 1 on CPU tensors, against torch in float64."""

import pytest
import torch
from conftest import fresh, sdpa64

import mercury


def bshd(*shape, dtype=torch.float64):
    return fresh(*shape, dtype=dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_attention(causal, layout):
    b, s, h, d = 2, 64, 4, 16
    shape = (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    q, k, v = (fresh(*shape) for _ in range(3))
    o = mercury.attention(q, k, v, causal=causal, layout=layout)
    assert o.shape == shape and o.dtype == torch.float64
    t = (lambda x: x.transpose(1, 2)) if layout == "bshd" else (lambda x: x)
    want = t(sdpa64(t(q), t(k), t(v), causal=causal))
    torch.testing.assert_close(o, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("where", ["q", "k"])
def test_a_nan_input_comes_back_nan_where_torch_gives_nan(where):
    # A NaN in q makes its row NaN; one in k every row that sees that key (causal: all of its
    # head's rows). Never a row of zeros, which would hide a training run gone bad.
    q, k, v = (bshd(1, 64, 2, 16) for _ in range(3))
    (q if where == "q" else k)[0, 5 if where == "q" else 0, 1, 3] = float("nan")
    o = mercury.attention(q, k, v, causal=True)
    want = sdpa64(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert torch.equal(o.isnan(), want.transpose(1, 2).isnan())
    assert o.isnan().any()


def test_attention_gqa_and_scale():
    q = bshd(1, 32, 8, 16)
    k, v = bshd(1, 32, 2, 16), bshd(1, 32, 2, 16)
    o = mercury.attention(q, k, v, causal=True, softmax_scale=0.3)
    want = sdpa64(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, scale=0.3)
    torch.testing.assert_close(o, want.transpose(1, 2), rtol=1e-9, atol=1e-12)


def test_attention_mla_value_head_dim():
    q, k = bshd(1, 32, 4, 24), bshd(1, 32, 4, 24)
    v = bshd(1, 32, 4, 16)
    o = mercury.attention(q, k, v, causal=True)
    assert o.shape == (1, 32, 4, 16)
    want = sdpa64(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    torch.testing.assert_close(o, want.transpose(1, 2), rtol=1e-9, atol=1e-12)


def test_attention_zigzag_world_1():
    q, k, v = (bshd(1, 64, 2, 16) for _ in range(3))
    zq, zk, zv = (mercury.shard_sequence(t, balance="zigzag") for t in (q, k, v))
    o = mercury.attention(zq, zk, zv, causal=True, balance="zigzag")
    full = mercury.unshard_sequence(o, balance="zigzag")
    want = sdpa64(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    torch.testing.assert_close(full, want.transpose(1, 2), rtol=1e-9, atol=1e-12)


def test_attention_float32_and_bfloat16():
    for dtype, tol in ((torch.float32, 2**-22), (torch.bfloat16, 2**-8)):
        q, k, v = (bshd(1, 32, 2, 16, dtype=dtype) for _ in range(3))
        o = mercury.attention(q, k, v)
        assert o.dtype == dtype
        want = sdpa64(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        torch.testing.assert_close(o.double(), want, rtol=tol, atol=1e-6)


def test_attention_is_a_custom_op_with_a_fake():
    q = bshd(1, 16, 2, 8)
    args = (False, None, "bshd", None, "auto", None, None)
    o, lse = torch.ops.mercury.attention(q, q, q, *args, False)
    torch.testing.assert_close(o, mercury.attention(q, q, q))
    assert lse.numel() == 0
    o, lse = torch.ops.mercury.attention(q, q, q, *args, True)
    assert lse.shape == (1, 2, 16) and lse.dtype == torch.float64
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fq = torch.empty(1, 16, 2, 8, dtype=torch.float64)
        fv = torch.empty(1, 16, 2, 4, dtype=torch.float64)
        out, lse = torch.ops.mercury.attention(fq, fq, fv, True, *args[1:], True)
        assert out.shape == (1, 16, 2, 4) and lse.shape == (1, 2, 16)


def lse64(q, k, *, causal=False, scale=None) -> torch.Tensor:
    """The log-sum-exp of each query row of ``[b, h, s, d]`` attention, in float64."""
    q, k = q.double(), k.double()
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.logsumexp(s, dim=-1)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_attention_return_lse(layout):
    b, s, hq, hk, d = 2, 32, 4, 2, 16
    t = (lambda x: x.transpose(1, 2)) if layout == "bshd" else (lambda x: x)
    q = t(fresh(b, hq, s, d))
    k, v = t(fresh(b, hk, s, d)), t(fresh(b, hk, s, d))
    o, lse = mercury.attention(q, k, v, causal=True, layout=layout, return_lse=True)
    torch.testing.assert_close(o, mercury.attention(q, k, v, causal=True, layout=layout))
    assert lse.shape == (b, hq, s) and lse.dtype == torch.float64
    want = lse64(t(q), t(k), causal=True)
    torch.testing.assert_close(lse, want, rtol=1e-12, atol=1e-12)
    o32, lse32 = mercury.attention(q.float(), k.float(), v.float(), layout=layout, return_lse=True)
    assert o32.dtype == torch.float32 and lse32.dtype == torch.float32
    torch.testing.assert_close(lse32.double(), lse64(t(q), t(k)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_attention_gradients_against_torch_autograd(causal, layout):
    b, s, hq, hk, d, dv = 1, 32, 4, 2, 16, 8
    t = (lambda x: x.transpose(1, 2)) if layout == "bshd" else (lambda x: x)
    q = t(fresh(b, hq, s, d)).requires_grad_()
    k = t(fresh(b, hk, s, d)).requires_grad_()
    v = t(fresh(b, hk, s, dv)).requires_grad_()
    do = t(fresh(b, hq, s, dv))
    o = mercury.attention(q, k, v, causal=causal, layout=layout, softmax_scale=0.4)
    got = torch.autograd.grad(o, (q, k, v), do)
    want_o = sdpa64(t(q), t(k), t(v), causal=causal, scale=0.4)
    want = torch.autograd.grad(t(want_o), (q, k, v), do)
    torch.testing.assert_close(o, t(want_o), rtol=1e-9, atol=1e-12)
    for name, g, w in zip("qkv", got, want, strict=True):
        assert g.shape == w.shape and g.dtype == torch.float64, name
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-11, msg=f"d{name}")


def test_attention_gradient_of_a_sum_and_zigzag_world_1():
    q, k, v = (bshd(1, 32, 2, 8).requires_grad_() for _ in range(3))
    mercury.attention(q, k, v, causal=True, balance="zigzag").sum().backward()
    qs, ks, vs = (x.detach().clone().requires_grad_() for x in (q, k, v))
    sdpa64(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2), causal=True).sum().backward()
    for a, b_ in ((q, qs), (k, ks), (v, vs)):
        torch.testing.assert_close(a.grad, b_.grad, rtol=1e-9, atol=1e-11)


def test_a_gradient_through_the_lse_is_refused_not_dropped():
    q, k, v = (bshd(1, 32, 2, 8).requires_grad_() for _ in range(3))
    o, lse = mercury.attention(q, k, v, causal=True, return_lse=True)
    # The output alone (the lse unused, or detached): gradients as torch's.
    (o.sum() + lse.detach().sum()).backward(retain_graph=True)
    qs, ks, vs = (x.detach().clone().requires_grad_() for x in (q, k, v))
    sdpa64(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2), causal=True).sum().backward()
    torch.testing.assert_close(q.grad, qs.grad, rtol=1e-9, atol=1e-11)
    for loss in (o.sum() + lse.sum(), lse.sum()):
        with pytest.raises(NotImplementedError, match="use lse.detach"):
            loss.backward(retain_graph=True)


def test_gemm_gradients_against_torch_autograd():
    for fn in (mercury.all_gather_matmul, mercury.matmul_reduce_scatter):
        x = fresh(4, 8, 24).requires_grad_()
        w = fresh(24, 40).requires_grad_()
        g = fresh(4, 8, 40)
        got = torch.autograd.grad(fn(x, w), (x, w), g)
        want = torch.autograd.grad(x @ w, (x, w), g)
        for a, b_ in zip(got, want, strict=True):
            torch.testing.assert_close(a, b_, rtol=1e-12, atol=1e-12)


def test_a_gradient_of_a_gradient_is_refused():
    """create_graph=True gives the first-order gradients; differentiating them raises (a
    second-order gradient without the ops' part would be silently wrong): eager, and through
    the custom ops' autograd (torch.compile)."""
    q, k, v = (bshd(1, 16, 2, 8).requires_grad_() for _ in range(3))
    x, w = fresh(4, 8, 24).requires_grad_(), fresh(24, 40).requires_grad_()

    def attention(q, k, v):
        return mercury.attention(q, k, v, causal=True)

    compiled = torch.compile(attention, backend="eager", fullgraph=True)
    cases = [("attention", attention, (q, k, v)), ("attention", compiled, (q, k, v))]
    cases += [(fn.__name__, fn, (x, w)) for fn in (mercury.all_gather_matmul,
                                                   mercury.matmul_reduce_scatter)]  # fmt: skip
    for what, fn, ins in cases:
        grads = torch.autograd.grad(fn(*ins).sum(), ins, create_graph=True)
        want = torch.autograd.grad(fn(*ins).sum(), ins)
        for a, b_ in zip(grads, want, strict=True):
            torch.testing.assert_close(a.detach(), b_, rtol=1e-12, atol=1e-12)
        penalty = sum((g**2).sum() for g in grads)
        with pytest.raises(NotImplementedError, match=f"mercury.{what}: a gradient of its grad"):
            penalty.backward()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_under_torch_compile(backend):
    """aot_eager traces the backward graph as inductor does (the backward is an op of its own,
    mercury::attention_backward: the executor never sees a fake tensor)."""
    q, k, v = (bshd(1, 16, 2, 8).requires_grad_() for _ in range(3))

    def block(q, k, v):
        return (mercury.attention(q, k, v, causal=True) * 3).sum()

    compiled = torch.compile(block, backend=backend, fullgraph=True)
    got = torch.autograd.grad(compiled(q, k, v), (q, k, v))
    want = torch.autograd.grad(block(q, k, v), (q, k, v))
    for a, b_ in zip(got, want, strict=True):
        torch.testing.assert_close(a, b_, rtol=1e-12, atol=1e-12)


def test_attention_under_torch_compile():
    q, k, v = (bshd(1, 16, 2, 8) for _ in range(3))

    def block(q, k, v):
        return mercury.attention(q * 2, k, v, causal=True) + 1

    compiled = torch.compile(block, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), block(q, k, v))


def test_all_gather_matmul_world_1():
    x, w = fresh(32, 24), fresh(24, 40)
    torch.testing.assert_close(mercury.all_gather_matmul(x, w), x @ w, rtol=1e-12, atol=1e-12)
    x3 = fresh(4, 8, 24)
    torch.testing.assert_close(mercury.all_gather_matmul(x3, w), x3 @ w, rtol=1e-12, atol=1e-12)


def test_matmul_reduce_scatter_world_1():
    x, w = fresh(32, 24, dtype=torch.float32), fresh(24, 40, dtype=torch.float32)
    out = mercury.matmul_reduce_scatter(x, w)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), x.double() @ w.double(), rtol=2**-22, atol=1e-6)


def test_shard_sequence_zigzag_layout():
    x = torch.arange(8).reshape(1, 8)
    assert mercury.shard_sequence(x).tolist() == x.tolist()
    assert mercury.shard_sequence(x, balance="zigzag").tolist() == x.tolist()
    with pytest.raises(ValueError, match="balance must be"):
        mercury.shard_sequence(x, balance="striped")


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_zigzag_chunks_hold_head_and_tail_of_every_round(world):
    """Each rank's positions under the chunked zigzag, against the definition: chunks r and
    2W-1-r of every round of 2W chunks, in sequence order; every position on exactly one
    rank; one round is the zigzag."""
    from mercury import _sequence

    n = 48 * world
    for chunk in (1, 2, 3, 6, 24):
        held = []
        for r in range(world):
            got = [
                p
                for s, c in _sequence.runs(n, world, r, f"zigzag:{chunk}", "x")
                for p in range(s, s + c)
            ]
            want = [p for p in range(n) if (p // chunk) % (2 * world) in (r, 2 * world - 1 - r)]
            assert got == want, (world, chunk, r)
            held += got
        assert sorted(held) == list(range(n))
    for r in range(world):
        assert _sequence.runs(n, world, r, f"zigzag:{n // (2 * world)}", "x") == _sequence.runs(
            n, world, r, "zigzag", "x"
        )


def test_chunk_size_refusals_name_the_argument():
    x = torch.arange(12).reshape(1, 12)
    with pytest.raises(ValueError, match="chunk_size needs balance='zigzag'"):
        mercury.shard_sequence(x, chunk_size=2)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="chunk_size must be a positive int"):
            mercury.shard_sequence(x, balance="zigzag", chunk_size=bad)
    says = "of length 12 does not split into rounds of 2 zigzag chunks of chunk_size=5 over 1 rank "
    with pytest.raises(ValueError, match="shard_sequence: dimension 1 " + says):
        mercury.shard_sequence(x, balance="zigzag", chunk_size=5)
    q = fresh(1, 12, 2, 4)
    with pytest.raises(ValueError, match="chunk_size needs balance='zigzag'"):
        mercury.attention(q, q, q, chunk_size=2)
    with pytest.raises(ValueError, match="mercury.attention: the query sequence " + says):
        mercury.attention(q, q, q, balance="zigzag", chunk_size=5)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    with pytest.raises(ValueError, match="mercury.varlen_attention: the query sequence " + says):
        mercury.varlen_attention(q[0], q[0], q[0], cu, cu, 7, 7, balance="zigzag", chunk_size=5)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        mercury.balance_documents(torch.tensor([0, 5, 12]), 1, balance="zigzag", chunk_size=0)
    with pytest.raises(ValueError, match="mercury.balance_documents: the documents " + says):
        mercury.balance_documents(torch.tensor([0, 5, 12]), 1, balance="zigzag", chunk_size=5)
    # At world size 1 the chunked zigzag holds the whole sequence in order.
    o = mercury.attention(q, q, q, causal=True, balance="zigzag", chunk_size=3)
    torch.testing.assert_close(o, mercury.attention(q, q, q, causal=True), rtol=0, atol=0)
