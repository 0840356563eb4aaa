#!/usr/bin/env python3
"""The `torch` part of scripts/gpu.sh: the `mercury` package on CUDA tensors.

    torch_gpu.py world1   # world size 1 and op(**inputs) on virtual ranks, against torch
    torch_gpu.py pair     # under nccl_pair (2 processes sharing one GPU over NCCL sockets)
    torch_gpu.py bench    # mercury.attention vs torch's cuDNN SDPA on the P2c shapes

Every check draws fresh random inputs, compares with torch (SDPA in f32 math, matmul in f32) on
the same bf16 values, relative error (Frobenius) within the GPU script's bf16 tolerance 2e-2,
and prints one line ending in `ok` or `FAILED`; the exit status is 1 if any failed. The bench
times both sides alike (sdpa_baseline.py's regime timing: warm-up, then CUDA events around
each call, the median) and prints host time per call beside the executor's device time.
"""

import os
import re
import sys
import time
from pathlib import Path

import mercury
import torch
import torch.nn.functional as F

TOL = 2e-2
FAILED = []
HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("MERCURY_ROOT", Path.cwd()))


def rel(got, want):
    got, want = got.float(), want.float()
    if not torch.isfinite(got).all():
        return float("inf")
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def check(name, got, want, tol=TOL):
    e = rel(got, want)
    ok = e <= tol
    print(f"check {name}: relative error {e:.3e} (tolerance {tol:g})  {'ok' if ok else 'FAILED'}")
    if not ok:
        FAILED.append(name)


def attempt(name, fn):
    """Runs one check; an exception is that check's failure (printed), not the end of the run."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - every failure is reported and counted
        print(f"check {name}: raised {type(e).__name__}: {e}  FAILED")
        FAILED.append(name)


def rand(*shape, dtype=torch.bfloat16):
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(dtype)


def sdpa_ref(q, k, v, causal):
    """[b, h, s, d] in f32 math, grouped-query heads expanded."""
    g = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(g, dim=1) for t in (k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)


def world1():
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")

    def attention(causal):
        b, s, h, d = 1, 4096, 8, 128
        q, k, v = rand(b, s, h, d), rand(b, s, h, d), rand(b, s, h, d)
        o = mercury.attention(q, k, v, causal=causal)
        want = sdpa_ref(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal)
        check(f"attention bshd s4096 h8 causal={causal}", o, want.transpose(1, 2))

    def gqa():
        q, k, v = rand(1, 32, 2048, 128), rand(1, 8, 2048, 128), rand(1, 8, 2048, 128)
        o = mercury.attention(q, k, v, causal=True, layout="bhsd")
        check("attention gqa 32q/8kv s2048 causal bhsd", o, sdpa_ref(q, k, v, True))

    def zigzag():
        q, k, v = (rand(1, 4096, 8, 128) for _ in range(3))
        z = [mercury.shard_sequence(t, balance="zigzag") for t in (q, k, v)]
        o = mercury.attention(*z, causal=True, balance="zigzag")
        o = mercury.unshard_sequence(o, balance="zigzag")
        want = sdpa_ref(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), True)
        check("attention zigzag world 1 causal", o, want.transpose(1, 2))

    def gemms():
        x, w = rand(4096, 4096), rand(4096, 2048)
        want = x.float() @ w.float()
        check("all_gather_matmul 4096x4096x2048", mercury.all_gather_matmul(x, w), want)
        check("matmul_reduce_scatter 4096x4096x2048", mercury.matmul_reduce_scatter(x, w), want)

    def virtual(sched):
        # op(**inputs): every rank a virtual rank on this GPU.
        text = (ROOT / "examples/attention.mlir").read_text()
        text = re.sub(r"commir\.axis @h = \d+", "commir.axis @h = 8", text)
        text = re.sub(r"(commir\.axis @[ij] = )\d+", r"\g<1>4096", text)
        op = mercury.compile(text, schedule=str(ROOT / f"examples/schedules/{sched}.sched"))
        ins = {n: rand(*s) for n, (_, s) in op.inputs.items()}
        out = op(**ins)["O"]
        want = sdpa_ref(ins["Q"], ins["K"], ins["V"], False)
        check(
            f"op(**inputs) {sched}, 8 virtual ranks, s4096 ({op.last_device_ms:.3f} ms)", out, want
        )

    def asynctp():
        op = mercury.compile(
            ROOT / "examples/ag_gemm.mlir",
            schedule=str(ROOT / "examples/schedules/asynctp_ag_gemm.sched"),
        )
        a, bm = rand(8192, 8192), rand(8192, 8192)
        out = op(A=a, B=bm)["C"]
        check(
            f"op(**inputs) asynctp_ag_gemm, 8 virtual ranks ({op.last_device_ms:.3f} ms)",
            out,
            a.float() @ bm.float(),
        )
        try:
            op(A=a.float(), B=bm)
            FAILED.append("wrong dtype accepted")
            print("check wrong dtype refused: accepted  FAILED")
        except ValueError as e:
            print(f"check wrong dtype refused: {e}  ok")

    attempt("attention noncausal", lambda: attention(False))
    attempt("attention causal", lambda: attention(True))
    attempt("attention gqa", gqa)
    attempt("attention zigzag", zigzag)
    attempt("gemm ops", gemms)
    for sched in ("ring_attention", "ulysses", "tree_attention"):
        attempt(f"op(**inputs) {sched}", lambda sched=sched: virtual(sched))
    attempt("op(**inputs) asynctp", asynctp)


def pair():
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    rank, world = dist.get_rank(), dist.get_world_size()
    x = rand(1, 64, 4, 16)
    dist.broadcast(x, 0)
    for balance in (None, "zigzag"):
        back = mercury.unshard_sequence(mercury.shard_sequence(x, balance=balance), balance=balance)
        check(f"rank {rank}: shard/unshard {balance or 'contiguous'} over {world}", back, x, 0.0)
    s = 64 if rank == 0 else 32
    q = rand(1, s, 4, 16)
    try:
        mercury.attention(q, q, q)
        FAILED.append("disagreeing shapes")
        print(f"check rank {rank}: shapes that disagree across ranks: not detected  FAILED")
    except ValueError as e:
        print(f"check rank {rank}: shapes that disagree across ranks refused: {e}  ok")
    q = rand(1, 64, 4, 16)
    try:
        mercury.attention(q, q, q)
        print(f"check rank {rank}: attention over {world} ranks ran  ok")
    except NotImplementedError as e:
        print(f"note rank {rank}: attention over {world} ranks: {e}")
    dist.destroy_process_group()


def bench():
    sys.path.insert(0, str(HERE))
    import sdpa_baseline  # carried beside this script
    from torch.nn.attention import SDPBackend, sdpa_kernel

    regime = sdpa_baseline.parse_regime(os.environ.get("MERCURY_REGIME", "back-to-back"))
    print(f"device: {torch.cuda.get_device_name(0)}; regime {regime}; warm-up 2, median of 7")
    print(
        "| case | torch cuDNN SDPA ms | mercury.attention ms | SDPA / mercury | executor "
        "device ms | host ms per call | host - device ms |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cid, b, hq, hk, s, causal, d in sdpa_baseline.CASES:
        if d != 128:
            continue
        q = (torch.rand(b, hq, s, d, device="cuda") * 3 - 1.5).to(torch.bfloat16)
        k = (torch.rand(b, hk, s, d, device="cuda") * 3 - 1.5).to(torch.bfloat16)
        v = (torch.rand(b, hk, s, d, device="cuda") * 2 - 1).to(torch.bfloat16)
        ke, ve = (t.repeat_interleave(hq // hk, dim=1) for t in (k, v))

        def torch_fn(ke=ke, ve=ve, q=q, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)

        def ours(q=q, k=k, v=v, causal=causal):
            return mercury.attention(q, k, v, causal=causal, layout="bhsd")

        try:
            check(f"bench {cid}", ours(), torch_fn())
        except Exception as e:  # noqa: BLE001 - reported, counted, next case
            print(f"check bench {cid}: raised {type(e).__name__}: {e}  FAILED")
            FAILED.append(f"bench {cid}")
            continue
        t_torch = sdpa_baseline.bench_regime(torch_fn, regime, 2, 7)
        t_ours = sdpa_baseline.bench_regime(ours, regime, 2, 7)
        n = 10
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            ours()
        torch.cuda.synchronize()
        host = (time.perf_counter() - t0) / n * 1e3
        dev = _last_device_ms()
        print(
            f"| {cid} | {t_torch:.3f} | {t_ours:.3f} | {t_torch / t_ours:.3f}x | {dev:.3f} | "
            f"{host:.3f} | {host - dev:.3f} |"
        )
        del q, k, v, ke, ve
        torch.cuda.empty_cache()


def _last_device_ms():
    """The device time of the last run of mercury's operators (the executor's stages)."""
    op = mercury._ops.last_op
    return op.last_device_ms if op is not None and op.last_device_ms is not None else float("nan")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "world1"
    {"world1": world1, "pair": pair, "bench": bench}[mode]()
    print(f"{len(FAILED)} failed" + (f": {', '.join(FAILED)}" if FAILED else ""))
    sys.exit(1 if FAILED else 0)
