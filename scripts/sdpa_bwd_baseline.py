#!/usr/bin/env python3
"""Times torch's cuDNN SDPA backward on the attention shapes of benchmark P2b (bf16).

The backward alone: `torch.ops.aten._scaled_dot_product_cudnn_attention_backward` on the O and
logsumexp of one cuDNN forward, with a random dO, i.e. the work of mercury-gpu-bench's P2b
rows (one fused backward producing dQ, dK, dV). GQA passes K/V with fewer heads (as
`enable_gqa=True` does); if the op refuses them, K/V expanded to all query heads (noted).
FLOPs: 2.5 x the forward's 4*B*H*S*S*D, half when causal. Timing as scripts/sdpa_baseline.py
(do_bench, or --regime as mercury-gpu-bench --regime); inputs drawn as there (--inputs).

Prints JSON {"device", "torch", "regime", "inputs", "results": [{"id", "backend": "CUDNN_BWD",
"ms", "tflops", "note"}]} and writes it to --out; ids match P2b's (and P2c's).

--suite check: no timing; one backward of each small shape (causal / not, GQA, head dims 64 to
256, d_v != d_qk, f16, lengths with s % 128 == 64 and odd ones), its gradients compared with
float64 autograd on the CPU (relative L2 error, non-finite count). Run it under
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=FILE to log the backend graphs torch builds.
"""
import argparse
import json
import math
import re
import sys

import torch

import sdpa_baseline as base

# id, batch, q heads, kv heads, seq, causal, head dim (P2b's timed cases)
CASES = [c for c in base.CASES]

# id, batch, q heads, kv heads, s_q, s_kv, causal, d_qk, d_v, dtype
CHECKS = [
    ("mha.s512.noncausal", 1, 4, 4, 512, 512, False, 128, 128, torch.bfloat16),
    ("mha.s512.causal", 1, 4, 4, 512, 512, True, 128, 128, torch.bfloat16),
    ("gqa8q2kv.s777x1000.noncausal", 2, 8, 2, 777, 1000, False, 128, 128, torch.bfloat16),
    ("gqa8q2kv.s777.causal", 2, 8, 2, 777, 777, True, 128, 128, torch.bfloat16),
    ("d64.s384.causal", 1, 4, 4, 384, 384, True, 64, 64, torch.bfloat16),
    ("d256.s384.causal", 1, 4, 4, 384, 384, True, 256, 256, torch.bfloat16),
    ("d256.s384.noncausal", 1, 4, 4, 384, 384, False, 256, 256, torch.bfloat16),
    ("mla.dqk192.dv128.causal", 1, 4, 4, 512, 512, True, 192, 128, torch.bfloat16),
    ("dqk128.dv64.noncausal", 1, 4, 2, 300, 333, False, 128, 64, torch.bfloat16),
    ("f16.s512.causal", 1, 4, 4, 512, 512, True, 128, 128, torch.float16),
    ("awkward.s192.causal", 1, 4, 4, 192, 192, True, 128, 128, torch.bfloat16),
    ("awkward.s320.noncausal", 1, 4, 4, 320, 320, False, 128, 128, torch.bfloat16),
    ("awkward.s1088.causal", 1, 4, 4, 1088, 1088, True, 128, 128, torch.bfloat16),
    ("awkward.s1088.gqa.noncausal", 1, 8, 2, 1088, 1088, False, 64, 64, torch.bfloat16),
]


def rel(got, want):
    got, want = got.double(), want.double()
    finite = torch.isfinite(got)
    bad = int((~finite).sum())
    g = torch.where(finite, got, torch.zeros_like(got))
    den = float(want.pow(2).sum().sqrt())
    return float((g - want).pow(2).sum().sqrt()) / max(den, 1e-300), bad


def run_checks(args):
    out = []
    for cid, b, hq, hk, sq, sk, causal, dqk, dv, dt in CHECKS:
        if args.cases and not re.search(args.cases, cid):
            continue
        g = torch.Generator(device="cpu").manual_seed(hash(cid) & 0xFFFF)
        q = (torch.rand(b, hq, sq, dqk, generator=g) * 3 - 1.5).to(dt)
        k = (torch.rand(b, hk, sk, dqk, generator=g) * 3 - 1.5).to(dt)
        v = (torch.rand(b, hk, sk, dv, generator=g) * 2 - 1).to(dt)
        do = (torch.rand(b, hq, sq, dv, generator=g) * 2 - 1).to(dt)
        scale = 1.0 / math.sqrt(dqk)
        row = {"id": cid}
        try:
            qd, kd, vd, dod = (t.cuda() for t in (q, k, v, do))
            fwd = torch.ops.aten._scaled_dot_product_cudnn_attention(
                qd, kd, vd, None, True, 0.0, causal, False, scale=scale)
            o, lse = fwd[0], fwd[1]
            grads = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
                dod, qd, kd, vd, o, lse, fwd[6], fwd[7], None, fwd[2], fwd[3], fwd[4], fwd[5],
                0.0, causal, scale=scale)
            torch.cuda.synchronize()
            # float64 autograd on the CPU, the same (rounded) inputs.
            q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
            ke = k64.repeat_interleave(hq // hk, dim=1)
            ve = v64.repeat_interleave(hq // hk, dim=1)
            s = (q64 @ ke.transpose(-1, -2)) * scale
            if causal:
                mask = torch.ones(sq, sk, dtype=torch.bool).tril()
                s = s.masked_fill(~mask, float("-inf"))
            o64 = torch.softmax(s, dim=-1) @ ve
            o64.backward(do.double())
            for name, got, want in (("dq", grads[0], q64.grad), ("dk", grads[1], k64.grad),
                                    ("dv", grads[2], v64.grad)):
                e, bad = rel(got.cpu(), want)
                row[name] = e
                row[name + "_nonfinite"] = bad
            row["o"] = rel(o.cpu(), o64.detach())[0]
        except Exception as e:  # report and go on
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(row), file=sys.stderr, flush=True)
        out.append(row)
    return out


def run_timed(args):
    results = []
    for cid, b, hq, hk, s, causal, D in CASES:
        if args.cases and not re.search(args.cases, cid):
            continue
        gen = torch.bfloat16 if args.inputs == "bf16-rand" else torch.float32

        def rand(*shape, scale, shift):
            return (torch.rand(*shape, device="cuda", dtype=gen) * scale - shift).to(torch.bfloat16)
        q = rand(b, hq, s, D, scale=3, shift=1.5)
        k = rand(b, hk, s, D, scale=3, shift=1.5)
        v = rand(b, hk, s, D, scale=2, shift=1)
        do = rand(b, hq, s, D, scale=2, shift=1)
        flops = 2.5 * 4.0 * b * hq * s * s * D * (0.5 if causal else 1.0)
        note = ""
        try:
            def fwd_of(k, v):
                return torch.ops.aten._scaled_dot_product_cudnn_attention(
                    q, k, v, None, True, 0.0, causal, False)
            try:
                fwd = fwd_of(k, v)
            except RuntimeError:
                if hq == hk:
                    raise
                k = k.repeat_interleave(hq // hk, dim=1)
                v = v.repeat_interleave(hq // hk, dim=1)
                note = "gqa via expanded K/V"
                fwd = fwd_of(k, v)

            def fn(k=k, v=v, fwd=fwd):
                return torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
                    do, q, k, v, fwd[0], fwd[1], fwd[6], fwd[7], None, fwd[2], fwd[3],
                    fwd[4], fwd[5], 0.0, causal)
            fn()
            torch.cuda.synchronize()
            ms = base.bench(fn, args.warmup_ms, args.rep_ms)
            results.append({"id": cid, "backend": "CUDNN_BWD", "ms": ms,
                            "tflops": flops / (ms * 1e-3) / 1e12, "note": note})
        except Exception as e:  # report and go on with the other cases
            results.append({"id": cid, "backend": "CUDNN_BWD", "ms": None, "tflops": None,
                            "note": f"error: {type(e).__name__}: {e}"[:300]})
        r = results[-1]
        print(f"sdpa-bwd {cid:<28} "
              + (f"{r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s {note}" if r["ms"] else r["note"]),
              file=sys.stderr, flush=True)
        del q, k, v, do
        torch.cuda.empty_cache()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--suite", choices=["timed", "check"], default="timed")
    ap.add_argument("--warmup-ms", type=float, default=150.0)
    ap.add_argument("--rep-ms", type=float, default=700.0)
    ap.add_argument("--cases", default=None, help="regular expression selecting case ids")
    ap.add_argument("--regime", type=base.parse_regime, default=None,
                    help="time as mercury-gpu-bench --regime does (see sdpa_baseline.py)")
    ap.add_argument("--inputs", choices=["bf16-rand", "f32-rand"], default="f32-rand",
                    help="how q, k, v, dO are drawn (see sdpa_baseline.py)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up calls with --regime")
    ap.add_argument("--reps", type=int, default=7, help="timed calls with --regime (the median)")
    args = ap.parse_args()
    args.regime_raw = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--regime=")), None)
    if args.regime is not None and args.regime_raw is None:
        args.regime_raw = sys.argv[sys.argv.index("--regime") + 1]
    base.ARGS = args
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "regime": args.regime_raw if args.regime is not None else "do_bench",
           "inputs": args.inputs}
    if args.suite == "check":
        out["checks"] = run_checks(args)
    else:
        out["results"] = run_timed(args)
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
