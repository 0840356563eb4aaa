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
    o = torch.ops.mercury.attention(q, q, q, False, None, "bshd", None, "auto", None, None)
    torch.testing.assert_close(o, mercury.attention(q, q, q))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fq = torch.empty(1, 16, 2, 8, dtype=torch.float64)
        fv = torch.empty(1, 16, 2, 4, dtype=torch.float64)
        out = torch.ops.mercury.attention(fq, fq, fv, True, None, "bshd", None, "auto", None, None)
        assert out.shape == (1, 16, 2, 4)


def test_attention_under_torch_compile():
    q, k, v = (bshd(1, 16, 2, 8) for _ in range(3))

    def block(q, k, v):
        return mercury.attention(q * 2, k, v, causal=True) + 1

    compiled = torch.compile(block, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), block(q, k, v))


def test_backward_is_not_implemented_and_says_so():
    q = bshd(1, 16, 2, 8).requires_grad_()
    o = mercury.attention(q, q.detach(), q.detach())
    with pytest.raises(NotImplementedError, match="has no backward yet"):
        o.sum().backward()


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
