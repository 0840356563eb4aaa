"""The Llama-3 decoder layer of examples/small/llama3_layer.mlir (8 kernels, 8 ranks), kernel by
kernel on the CPU executor under the shipped layer schedules, against a PyTorch Llama layer with
the same weights in float64: what the CommIR module computes is a Llama layer (RMSNorm, RoPE
with the rotate_half convention, grouped-query heads, SwiGLU), not only what its single-device
plan computes."""

import pytest
import torch
from conftest import EXAMPLES, SCHEDULES, fresh, sdpa64

import mercury

KERNELS = [
    "attn_norm",
    "qkv_rope",
    "attention",
    "o_proj",
    "ffn_norm",
    "gate_up",
    "down",
    "residual",
]
TOKENS, DIM, HEADS, KV_HEADS, HEAD_DIM, HIDDEN = 128, 128, 16, 8, 8, 256
EPS = 1e-5
# The shipped layer schedules (test_compile.py counts them as tested here).
LAYER_SCHEDULES = ["llama3_layer_cp.sched", "llama3_layer_ulysses.sched", "llama3_layer_tp.sched"]


def layer_text() -> str:
    """The small layer with every buffer and tile in f64 (every value exact)."""
    text = (EXAMPLES / "small" / "llama3_layer.mlir").read_text()
    return text.replace("tile<f32>", "tile<f64>").replace("] f32 ", "] f64 ")


def rope_tables(theta: float = 500000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's rotary tables ``[tokens, head_dim]``: each frequency twice (rotate_half form)."""
    inv = 1.0 / theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    ang = torch.outer(torch.arange(TOKENS, dtype=torch.float64), inv)
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos(), ang.sin()


def torch_layer(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Llama-3 layer as PyTorch writes it, every intermediate the module stores."""

    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * g

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    x = w["X"]
    xn = rms(x, w["Wn1"])
    q = torch.einsum("bie,hed->bhid", xn, w["Wq"])
    k = torch.einsum("bie,hed->bhid", xn, w["Wk"])
    v = torch.einsum("bie,hed->bhid", xn, w["Wv"])
    cos, sin = w["Cos"], w["Sin"]
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    o = sdpa64(q, k, v, causal=True)
    a = torch.einsum("bhid,hde->bie", o, w["Wo"])
    h = x + a
    hn = rms(h, w["Wn2"])
    z = torch.nn.functional.silu(hn @ w["Wg"]) * (hn @ w["Wu"])
    d = z @ w["Wd"]
    return {
        "Xn": xn,
        "Q": q,
        "K": k,
        "V": v,
        "O": o,
        "A": a,
        "H": h,
        "Hn": hn,
        "Z": z,
        "D": d,
        "Y": h + d,
    }


@pytest.mark.parametrize("schedule", LAYER_SCHEDULES)
def test_llama_layer_against_torch(schedule):
    cos, sin = rope_tables()
    values = {
        "X": fresh(1, TOKENS, DIM),
        "Wn1": 1 + 0.1 * fresh(DIM),
        "Wn2": 1 + 0.1 * fresh(DIM),
        "Wq": fresh(HEADS, DIM, HEAD_DIM) * DIM**-0.5,
        "Wk": fresh(KV_HEADS, DIM, HEAD_DIM) * DIM**-0.5,
        "Wv": fresh(KV_HEADS, DIM, HEAD_DIM) * DIM**-0.5,
        "Wo": fresh(HEADS, HEAD_DIM, DIM) * (HEADS * HEAD_DIM) ** -0.5,
        "Wg": fresh(DIM, HIDDEN) * DIM**-0.5,
        "Wu": fresh(DIM, HIDDEN) * DIM**-0.5,
        "Wd": fresh(HIDDEN, DIM) * HIDDEN**-0.5,
        "Cos": cos,
        "Sin": sin,
    }
    want = torch_layer(values)
    text = layer_text()
    path = str(SCHEDULES / schedule)
    checked = []
    for kernel in KERNELS:
        op = mercury.compile(text, kernel=kernel, schedule=path)
        assert op.ranks == 8
        # Each kernel reads the module's outputs so far (edges placed alike: nothing to move).
        out = op(**{name: values[name] for name in op.inputs})
        for name, got in out.items():
            torch.testing.assert_close(got, want[name], rtol=1e-9, atol=1e-11, msg=name)
            checked.append(name)
        values.update(out)
    assert sorted(checked) == sorted(want)
