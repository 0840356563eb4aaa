#!/usr/bin/env python3
"""Times torch SDPA on the attention shapes of benchmarks P2 and P2c (bf16).

Backends: FLASH_ATTENTION (the FlashAttention-2 kernel) and CUDNN_ATTENTION (cuDNN fused
attention, FA3-class on Hopper). Median of triton.testing.do_bench (CUDA-event timing), fresh
random inputs. FLOPs are counted as 4*B*H*S*S*D, half when causal. GQA runs with
enable_gqa=True; a backend that refuses it is timed on K/V expanded to all query heads (noted).

Prints JSON {"device": ..., "torch": ..., "results": [{"id", "backend", "ms", "tflops", "note"}]}
and writes it to --out when given. The ids match mercury-gpu-bench's P2 case ids.

With --regime (back-to-back, idle=MS, sustained=MS, idle=MS,sustained=MS) the calls are timed as mercury-gpu-bench
--regime times ours, instead of do_bench: the H200's clocks fall under load, so two sides are
compared only when timed in one regime (docs/perf.md, "Method").
For the same reason the inputs' bits matter: --inputs f32-rand (the default) draws them as
mercury-gpu-bench does, every mantissa bit random; the JSON records "regime" and "inputs", and
mercury-gpu-bench marks its ratios "timed unalike" or "inputs unalike" when they differ.
"""
import argparse
import json
import re
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CASES = [
    # id, batch, q heads, kv heads, seq, causal, head dim
    ("b1h32s32k.causal", 1, 32, 32, 32768, True, 128),
    ("b1h32s32k.noncausal", 1, 32, 32, 32768, False, 128),
    ("gqa32q8kv.s32k.noncausal", 1, 32, 8, 32768, False, 128),
    ("gqa32q8kv.s32k.causal", 1, 32, 8, 32768, True, 128),
    ("b16h32s4k.noncausal", 16, 32, 32, 4096, False, 128),
    ("b16h32s4k.causal", 16, 32, 32, 4096, True, 128),
    ("b1h32s32k.d64.noncausal", 1, 32, 32, 32768, False, 64),
    ("b1h32s32k.d64.causal", 1, 32, 32, 32768, True, 64),
    ("b1h32s32k.d256.noncausal", 1, 32, 32, 32768, False, 256),
    ("b1h32s32k.d256.causal", 1, 32, 32, 32768, True, 256),
    ("b1h32s4kx4k.noncausal", 1, 32, 32, 4096, False, 128),
]
# CUDNN_LSE: the same cuDNN kernel through torch's internal op with the softmax statistics
# requested (compute_log_sumexp=True), i.e. the same work as our patch (O plus LSE).
BACKENDS = [("FLASH_ATTENTION", SDPBackend.FLASH_ATTENTION),
            ("CUDNN_ATTENTION", SDPBackend.CUDNN_ATTENTION),
            ("CUDNN_LSE", None)]


def parse_regime(raw):
    """`back-to-back`, `idle=MS`, `sustained=MS` or `idle=MS,sustained=MS`, as
    mercury-gpu-bench --regime takes them: (idle ms, sustained ms)."""
    bad = argparse.ArgumentTypeError(
        f"'{raw}' is not a regime: back-to-back, idle=MS, sustained=MS or idle=MS,sustained=MS "
        "(MS in [0, 60000])")
    if raw == "back-to-back":
        return (0.0, 0.0)
    parts = raw.split(",")
    if len(parts) > 2:
        raise bad
    idle, sustained = 0.0, 0.0
    for i, part in enumerate(parts):
        kind, _, ms = part.partition("=")
        try:
            v = float(ms)
        except ValueError:
            raise bad
        if not (0.0 <= v <= 60000.0):
            raise bad
        if kind == "idle" and i == 0:
            idle = v
        elif kind == "sustained" and i == len(parts) - 1:
            sustained = v
        else:
            raise bad
    return (idle, sustained)


def bench_regime(fn, regime, warmup, reps):
    """Times `fn` as mercury-gpu-bench's Bench::time does in the same --regime: the stream
    drained and `idle` ms of host sleep, then `warmup` calls, then back-to-back calls until
    `sustained` ms of host time have passed since the warm-up began (synchronising every 4
    calls), then `reps` calls back to back, each between two CUDA events; the median (ms)."""
    idle, sustained = regime
    if idle > 0:
        torch.cuda.synchronize()
        time.sleep(idle / 1e3)
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    if sustained > 0:
        while (time.perf_counter() - t0) * 1e3 < sustained:
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    evs = []
    for _ in range(max(reps, 1)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        evs.append((a, b))
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in evs)
    return times[len(times) // 2]


def bench(fn, warmup_ms, rep_ms):
    if ARGS.regime is not None:
        return bench_regime(fn, ARGS.regime, ARGS.warmup, ARGS.reps)
    try:
        from triton.testing import do_bench
        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    except ImportError:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]


ARGS = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--warmup-ms", type=float, default=150.0)
    ap.add_argument("--rep-ms", type=float, default=700.0)
    ap.add_argument("--cases", default=None, help="regular expression selecting case ids")
    ap.add_argument("--backends", default=None,
                    help="regular expression selecting backends (FLASH_ATTENTION, CUDNN_ATTENTION, CUDNN_LSE)")
    ap.add_argument("--regime", type=parse_regime, default=None,
                    help="time as mercury-gpu-bench --regime does (back-to-back, idle=MS, sustained=MS, "
                         "idle=MS,sustained=MS: --warmup calls, then --reps calls) instead of do_bench")
    ap.add_argument("--inputs", choices=["bf16-rand", "f32-rand", "f32-unit", "f32-normal"],
                    default="f32-rand",
                    help="how q, k, v are drawn: in f32 rounded to bf16 (the default: every "
                         "mantissa bit random, as mercury-gpu-bench's) or torch.rand in bf16 (256 "
                         "levels in [0, 1): 1.2-2.5%% faster at the power limit, same kernel); "
                         "f32-unit: uniform in [-1, 1) for all three (mercury-run's inputs); "
                         "f32-normal: normal, q at std 2 (scripts/baselines/attention.py's)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up calls with --regime")
    ap.add_argument("--reps", type=int, default=7, help="timed calls with --regime (the median)")
    args = ap.parse_args()
    args.regime_raw = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--regime=")), None)
    if args.regime is not None and args.regime_raw is None:
        args.regime_raw = sys.argv[sys.argv.index("--regime") + 1]
    global ARGS
    ARGS = args
    dev = torch.cuda.get_device_name(0)
    results = []
    for cid, b, hq, hk, s, causal, D in CASES:
        if args.cases and not re.search(args.cases, cid):
            continue
        # --inputs f32-rand (the default) draws in f32 and rounds to bf16, so that every
        # mantissa bit is random, as mercury-gpu-bench's fill is; bf16-rand draws from bf16's
        # 256-level grid in [0, 1). Under the power limit the clocks follow the data's bits
        # (docs/perf.md, "Method": 1.2-2.5% on the same kernel).
        # f32-unit and f32-normal are the inputs of the suite's two sides (mercury-run's
        # uniform draws, the distributed baselines' normal ones), to time what their
        # distributions cost on one kernel.
        gen = torch.bfloat16 if args.inputs == "bf16-rand" else torch.float32
        def rand(*shape, scale, shift):
            return (torch.rand(*shape, device="cuda", dtype=gen) * scale - shift).to(torch.bfloat16)
        if args.inputs == "f32-normal":
            q, k, v = (torch.randn(b, h, s, D, device="cuda") * sc
                       for h, sc in ((hq, 2.0), (hk, 1.0), (hk, 1.0)))
            q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        elif args.inputs == "f32-unit":
            q, k, v = (rand(b, h, s, D, scale=2, shift=1) for h in (hq, hk, hk))
        else:
            q = rand(b, hq, s, D, scale=3, shift=1.5)
            k = rand(b, hk, s, D, scale=3, shift=1.5)
            v = rand(b, hk, s, D, scale=2, shift=1)
        flops = 4.0 * b * hq * s * s * D * (0.5 if causal else 1.0)
        for name, backend in BACKENDS:
            if args.backends and not re.search(args.backends, name):
                continue
            note = ""
            try:
                if backend is None:
                    ke, ve = k, v
                    if hq != hk:
                        ke = k.repeat_interleave(hq // hk, dim=1)
                        ve = v.repeat_interleave(hq // hk, dim=1)
                        note = "gqa via expanded K/V"

                    def fn(k=ke, v=ve):
                        return torch.ops.aten._scaled_dot_product_cudnn_attention(
                            q, k, v, None, True, 0.0, causal, False)
                    fn()
                    torch.cuda.synchronize()
                    ms = bench(fn, args.warmup_ms, args.rep_ms)
                    results.append({"id": cid, "backend": name, "ms": ms,
                                    "tflops": flops / (ms * 1e-3) / 1e12, "note": note})
                    r = results[-1]
                    print(f"sdpa {cid:<28} {name:<16} {ms:9.3f} ms {r['tflops']:7.1f} TFLOP/s {note}",
                          file=sys.stderr, flush=True)
                    continue

                def fn(k=k, v=v, gqa=hq != hk):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                              enable_gqa=gqa)
                try:
                    fn()
                except RuntimeError:
                    if hq == hk:
                        raise
                    ke = k.repeat_interleave(hq // hk, dim=1)
                    ve = v.repeat_interleave(hq // hk, dim=1)
                    note = "gqa via expanded K/V"

                    def fn(k=ke, v=ve, gqa=False):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    fn()
                torch.cuda.synchronize()
                ms = bench(fn, args.warmup_ms, args.rep_ms)
                results.append({"id": cid, "backend": name, "ms": ms,
                                "tflops": flops / (ms * 1e-3) / 1e12, "note": note})
            except Exception as e:  # report and go on with the other cases
                results.append({"id": cid, "backend": name, "ms": None, "tflops": None,
                                "note": f"error: {type(e).__name__}: {e}"[:300]})
            r = results[-1]
            print(f"sdpa {cid:<28} {name:<16} "
                  + (f"{r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s {note}" if r["ms"] else r["note"]),
                  file=sys.stderr, flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    # How the times were taken: mercury-gpu-bench puts a ratio beside ours only when it timed
    # in the same regime.
    regime = args.regime_raw if args.regime is not None else "do_bench"
    out = {"device": dev, "torch": torch.__version__, "regime": regime, "inputs": args.inputs,
           "results": results}
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
