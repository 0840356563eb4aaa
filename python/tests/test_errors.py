"""Bad input: a Python exception with a clear message, naming what is wrong."""

import pytest
import torch
from conftest import EXAMPLES, fresh

import mercury

SMALL = EXAMPLES / "small" / "attention.mlir"


@pytest.fixture(scope="module")
def op():
    return mercury.compile(SMALL, schedule="none")


def test_wrong_dtype_names_both(op):
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    ins["K"] = ins["K"].double()
    with pytest.raises(
        ValueError,
        match=r"input 'K': the tensor is torch.float64 but buffer @K"
        r" is f32",
    ):
        op(**ins)


def test_integer_dtype(op):
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    ins["Q"] = torch.zeros(ins["Q"].shape, dtype=torch.int32)
    with pytest.raises(ValueError, match="torch.int32 but buffer @Q is f32"):
        op(**ins)


def test_wrong_shape_names_both(op):
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    ins["V"] = fresh(1, 4, 128, 16, dtype=torch.float32)
    with pytest.raises(
        ValueError,
        match=r"input 'V': the tensor has shape \[1, 4, 128, 16\] but"
        r" buffer @V is \[1, 4, 256, 16\]",
    ):
        op(**ins)


def test_missing_and_unknown_inputs(op):
    q = fresh(1, 4, 256, 16, dtype=torch.float32)
    with pytest.raises(ValueError, match="input 'K' is missing"):
        op(Q=q, V=q)
    with pytest.raises(ValueError, match="'X' is not an input of @attention"):
        op(Q=q, K=q, V=q, X=q)
    with pytest.raises(TypeError, match="input 'Q' must be a torch.Tensor"):
        op(Q=[1.0], K=q, V=q)


def test_devices_take_cuda_tensors_and_gpu_ordinals(op):
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    with pytest.raises(ValueError, match=r"devices=\[0, 1\]: spreading the ranks .* on cpu"):
        op(**ins, devices=[0, 1])
    for bad in ([], "0", [0, -1], [True], None):
        with pytest.raises(ValueError, match="devices must be a non-empty list of GPU ordinals"):
            op(**ins, devices=bad)


def test_non_contiguous_cpu_inputs_are_read_as_they_are(op):
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    strided = {n: t.transpose(2, 3).contiguous().transpose(2, 3) for n, t in ins.items()}
    assert not strided["Q"].is_contiguous()
    torch.testing.assert_close(op(**strided)["O"], op(**ins)["O"])


def test_commir_error_carries_the_located_diagnostic():
    bad = SMALL.read_text().replace("commir.load @K[@b, @h, @j]", "commir.load @K[@b, @h, @zz]")
    with pytest.raises(mercury.CompileError) as e:
        mercury.compile(bad)
    assert e.value.args[0].startswith("<source>:")
    assert ": error: " in str(e.value)
    assert "^" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_located_in_the_file():
    with pytest.raises(mercury.CompileError, match=r"^<source>:1:1: error"):
        mercury.compile("commir.kernel @x on @m {\n}")


def test_schedule_that_does_not_apply():
    with pytest.raises(mercury.CompileError) as e:
        mercury.compile(SMALL, schedule="tile{axis=nope factor=8 outer=a inner=b}\n")
    assert f"{SMALL}:7:1: error: tile: '@nope' is not an axis of '@attention'" in str(e.value)
    assert "<schedule>:1:1: note: in pass 'tile{axis=nope" in str(e.value)
    with pytest.raises(ValueError, match="does not refer to a registered pass"):
        mercury.compile(SMALL, schedule="no-such-pass")
    with pytest.raises(ValueError, match="cannot read schedule 'missing.sched'"):
        mercury.compile(SMALL, schedule="missing.sched")


def test_unknown_topology():
    with pytest.raises(ValueError, match="neither a topology preset nor a readable file"):
        mercury.compile(SMALL, topology="h100-9x9")


def test_auto_refuses_an_operator_it_cannot_search():
    mlp = (EXAMPLES / "mlp.mlir").read_text()
    with pytest.raises(mercury.CompileError, match="one attention or one GEMM"):
        mercury.compile(mlp)


def test_a_kernel_the_input_lacks_is_named_before_any_search():
    for schedule in ("auto", "none"):
        with pytest.raises(ValueError, match=r"^no kernel '@nope' in the input \(it has @"):
            mercury.compile(SMALL, kernel="nope", schedule=schedule)


def test_attention_bad_inputs():
    q = fresh(1, 16, 4, 8)
    with pytest.raises(ValueError, match="q, k, v must share a dtype"):
        mercury.attention(q, q.float(), q)
    with pytest.raises(ValueError, match="grouped-query attention needs a multiple"):
        mercury.attention(q, fresh(1, 16, 3, 8), fresh(1, 16, 3, 8))
    with pytest.raises(ValueError, match="batch and sequence"):
        mercury.attention(q, fresh(1, 8, 4, 8), fresh(1, 8, 4, 8))
    with pytest.raises(ValueError, match="layout must be"):
        mercury.attention(q, q, q, layout="sbhd")
    with pytest.raises(ValueError, match="must be 4-D"):
        mercury.attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="not a floating-point type"):
        i = torch.zeros(1, 16, 4, 8, dtype=torch.int64)
        mercury.attention(i, i, i)
    with pytest.raises(ValueError, match="does not split into 2 equal zigzag chunks"):
        odd = fresh(1, 15, 4, 8)
        mercury.attention(odd, odd, odd, balance="zigzag")
    with pytest.raises(TypeError, match="q must be a torch.Tensor, not list"):
        mercury.attention([[1.0]], q, q)
    with pytest.raises(TypeError, match="causal must be a bool, not str 'yes'"):
        mercury.attention(q, q, q, causal="yes")
    with pytest.raises(TypeError, match="softmax_scale must be a number .* not str '0.5'"):
        mercury.attention(q, q, q, softmax_scale="0.5")
    # A one-element tensor is its value.
    torch.testing.assert_close(
        mercury.attention(q, q, q, softmax_scale=torch.tensor(0.3)),
        mercury.attention(q, q, q, softmax_scale=0.3),
    )


def test_matmul_bad_inputs():
    x = fresh(8, 4)
    with pytest.raises(ValueError, match="x has 4 columns but w has 5 rows"):
        mercury.all_gather_matmul(x, fresh(5, 3))
    with pytest.raises(ValueError, match="only dimension 0"):
        mercury.matmul_reduce_scatter(x, fresh(4, 3), scatter_dim=1)
    with pytest.raises(ValueError, match="x is torch.float64 on cpu but w is torch.float32"):
        mercury.all_gather_matmul(x, fresh(4, 3).float())
