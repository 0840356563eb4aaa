"""mercury.compile(...)(**inputs) on CPU tensors: every shipped schedule of the examples (made
small) against torch in float64, the reports, and the schedules "auto" and "none"."""

import pytest
import torch
import torch.nn.functional as F
from conftest import EXAMPLES, SCHEDULES, fresh, sdpa64, small
from test_llama_layer import LAYER_SCHEDULES

import mercury

ATTN = {"h": 8, "i": 256, "j": 256}
HEAD = {128: 16}

# (schedule, example, axes, causal)
ATTENTION_SCHEDULES = [
    ("ring_attention.sched", "attention.mlir", ATTN, False),
    ("context_parallel.sched", "attention.mlir", ATTN, False),
    ("tree_attention.sched", "attention.mlir", ATTN, False),
    ("ulysses.sched", "attention.mlir", ATTN, False),
    ("zigzag_ring.sched", "attention_causal.mlir", ATTN, True),
    ("striped_ring.sched", "attention_causal.mlir", {"h": 2, "i": 1024, "j": 1024}, True),
    ("ring_attention.sched", "attention_causal_zigzag.mlir", ATTN, True),
    ("loongtrain.sched", "attention_2x4.mlir", ATTN, False),
    ("usp.sched", "attention_2x4.mlir", ATTN, False),
    ("ulysses_kv_replicated.sched", "attention_gqa_kv4.mlir", {"i": 128, "j": 128}, False),
]

GEMM = {"m": 64, "k": 32, "n": 48}
MLP = {"m": 64, "d": 32, "f": 64, "e": 48}
GEMM_SCHEDULES = [
    ("asynctp_ag_gemm.sched", "ag_gemm.mlir", GEMM),
    ("chunked_rs.sched", "gemm_rs.mlir", GEMM),
    ("megatron_rs.sched", "gemm_rs.mlir", GEMM),
    ("shift_reduce.sched", "gemm_rs.mlir", GEMM),
    ("shift_reduce_halves.sched", "gemm_rs.mlir", GEMM),
    ("mlp_megatron.sched", "mlp.mlir", MLP),
    ("mlp_overlap.sched", "mlp.mlir", MLP),
    ("mlp_ag_rs.sched", "mlp.mlir", MLP),
]


# The backward schedules (examples/attention_bwd.mlir) are checked against the unscheduled
# backward by the compiler's own CPU tests; this suite does not run them against torch autograd
# yet. Listed by name, so that a new forward schedule still fails the test below.
BACKWARD_SCHEDULES = {
    f"{name}_bwd.sched"
    for name in (
        "loongtrain",
        "ring_attention",
        "ring_flash_attn",
        "striped_ring",
        "ulysses",
        "ulysses_kv_replicated",
        "usp",
        "zigzag_ring",
        "zigzag_ring_flash_attn",
    )
}


def test_every_shipped_schedule_is_tested():
    tested = {s for s, *_ in ATTENTION_SCHEDULES} | {s for s, *_ in GEMM_SCHEDULES}
    tested |= set(LAYER_SCHEDULES)
    shipped = {p.name for p in SCHEDULES.glob("*.sched")} - BACKWARD_SCHEDULES
    assert shipped == tested


def attention_inputs(op):
    return {name: fresh(*shape) for name, (_, shape) in op.inputs.items()}


@pytest.mark.parametrize("sched,example,axes,causal", ATTENTION_SCHEDULES)
def test_attention_schedule(sched, example, axes, causal):
    op = mercury.compile(small(example, axes, dims=HEAD), schedule=str(SCHEDULES / sched))
    assert op.schedule == (SCHEDULES / sched).read_text()
    assert op.decision is None
    ins = attention_inputs(op)
    out = op(**ins)
    assert set(out) == {"O"}
    want = sdpa64(ins["Q"], ins["K"], ins["V"], causal=causal)
    torch.testing.assert_close(out["O"], want, rtol=1e-9, atol=1e-12)


def mlp64(x, w1, w2):
    return F.gelu(x @ w1, approximate="tanh") @ w2


@pytest.mark.parametrize("sched,example,axes", GEMM_SCHEDULES)
def test_gemm_schedule(sched, example, axes):
    op = mercury.compile(small(example, axes), schedule=str(SCHEDULES / sched))
    ins = {name: fresh(*shape) for name, (_, shape) in op.inputs.items()}
    out = op(**ins)
    if example == "mlp.mlir":
        name, want = "Y", mlp64(ins["X"], ins["W1"], ins["W2"])
    else:
        name, want = "C", ins["A"] @ ins["B"]
    torch.testing.assert_close(out[name], want, rtol=1e-9, atol=1e-12)


SMALL = EXAMPLES / "small" / "attention.mlir"


@pytest.mark.parametrize(
    "schedule",
    [
        "auto",
        "none",
        "shift-shard",
        str(SCHEDULES / "ring_attention.sched"),
        str(SCHEDULES / "context_parallel.sched"),
        str(SCHEDULES / "tree_attention.sched"),
    ],
)
def test_small_example(schedule):
    op = mercury.compile(SMALL, schedule=schedule)
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    out = op(**ins)["O"]
    assert out.dtype == torch.float32
    want = sdpa64(ins["Q"], ins["K"], ins["V"])
    torch.testing.assert_close(out.double(), want, rtol=2**-20, atol=1e-7)


def test_auto_says_what_it_chose_and_caches_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MERCURY_CACHE_DIR", str(tmp_path))
    op = mercury.compile(SMALL)
    assert op.decision.startswith("mesh 8:")
    assert "chosen by search on h100-1x8" in op.decision
    assert op.schedule.strip()
    again = mercury.compile(SMALL)
    assert "chosen by cache" in again.decision
    assert again.schedule == op.schedule
    assert list(tmp_path.iterdir())
    monkeypatch.setenv("MERCURY_CACHE_DIR", "")
    assert "chosen by search" in mercury.compile(SMALL).decision


def test_auto_on_a_named_topology():
    op = mercury.compile(SMALL, topology="h100-2x4")
    assert "on h100-2x4" in op.decision


def test_reports():
    op = mercury.compile(SMALL, schedule=str(SCHEDULES / "ring_attention.sched"))
    assert op.comm_plan.startswith("// comm-plan @attention: mesh [8], 8 ranks")
    assert "ring p2p" in op.comm_plan
    assert op.memory.startswith("// memory @attention: ")
    assert "per rank at most (8 ranks)" in op.memory
    assert op.ranks == 8
    assert op.kernel == "attention"
    assert '"ranks"' in op.plan_json()
    assert op.outputs == {"O": (torch.float32, (1, 4, 256, 16))}


def test_schedule_script_text_and_pipeline():
    script = "tile{axis=i factor=8 outer=i0 inner=i_t}\nparallelize{axis=i0 level=0}\n"
    op = mercury.compile(SMALL, schedule=script)
    assert op.schedule == script
    piped = mercury.compile(SMALL, schedule="builtin.module(shift-shard)")
    ins = {n: fresh(*s, dtype=torch.float32) for n, (_, s) in op.inputs.items()}
    torch.testing.assert_close(op(**ins)["O"], piped(**ins)["O"], rtol=1e-6, atol=1e-7)


def test_bf16_outputs_are_rounded_once():
    text = small("ag_gemm.mlir", GEMM, dtype=None)
    op = mercury.compile(text, schedule=str(SCHEDULES / "asynctp_ag_gemm.sched"))
    a, b = fresh(64, 32, dtype=torch.bfloat16), fresh(32, 48, dtype=torch.bfloat16)
    out = op(A=a, B=b)["C"]
    assert out.dtype == torch.bfloat16
    # Each element is the f64 product rounded once to bf16: within half a bf16 ulp (2^-8
    # relative) of the exact value. (Not bit-equal to torch's rounding of its own f64 sum: the
    # two f64 sums differ in their last bit, which can fall on either side of a tie.)
    exact = a.double() @ b.double()
    torch.testing.assert_close(out.double(), exact, rtol=2**-8, atol=1e-30)
