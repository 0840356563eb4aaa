#!/usr/bin/env python3
"""The table of docs/perf-runs/2026-12-03c-regimes.sh: per P2c case and regime, ours and
torch's CUDNN_LSE medians (ms) in each round and torch/ours per round (>1: ours faster), and
the SM clock range nvidia-smi saw."""
import glob, json, os, sys

w = sys.argv[1]
def load(side, regime, rnd):
    p = os.path.join(w, f"{side}.{regime.replace('=', '-')}.{rnd}.json")
    if not os.path.exists(p):
        return {}
    j = json.load(open(p))
    if side == "torch":
        return {r["id"]: r["ms"] for r in j["results"] if r["backend"] == "CUDNN_LSE" and r["ms"]}
    return {r["id"][4:]: (r["median_ms"], r.get("pass", True)) for r in j["rows"]
            if r["id"].startswith("P2c.") and r["median_ms"] > 0}

regimes = [g for g in ["sustained=1500", "idle=2000"] if glob.glob(os.path.join(w, f"*.{g.replace('=', '-')}.*.json"))]
print("| case | regime | ours r1 | torch r1 | torch/ours r1 | ours r2 | torch r2 | torch/ours r2 | checks |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
ratios = {g: [] for g in regimes}
ids = None
for g in regimes:
    o1, t1, o2, t2 = load("ours", g, 1), load("torch", g, 1), load("ours", g, 2), load("torch", g, 2)
    ids = ids or list(o1) or list(o2)
    for cid in ids:
        cells, ok = [], True
        for o, t in ((o1, t1), (o2, t2)):
            if cid in o and cid in t:
                ms, p = o[cid]
                ok &= p
                cells += [f"{ms:.3f}", f"{t[cid]:.3f}", f"{t[cid] / ms:.3f}x"]
                ratios[g].append(t[cid] / ms)
            else:
                cells += ["-", "-", "-"]
        print(f"| {cid} | {g} | " + " | ".join(cells) + f" | {'ok' if ok else 'FAILED'} |")
for g in regimes:
    r = ratios[g]
    if r:
        gm = 1.0
        for x in r:
            gm *= x
        gm **= 1 / len(r)
        print(f"{g}: torch/ours geometric mean {gm:.3f}x over {len(r)} rows, min {min(r):.3f}x, max {max(r):.3f}x")
smi = os.path.join(w, "smi.csv")
if os.path.exists(smi):
    clk = [int(l.split(",")[1].split()[0]) for l in open(smi) if "MHz" in l]
    pw = [float(l.split(",")[2].split()[0]) for l in open(smi) if " W" in l]
    if clk:
        print(f"SM clock {min(clk)}..{max(clk)} MHz, power up to {max(pw):.0f} W over {len(clk)} samples")
