#!/usr/bin/env python3
"""The table of scripts/bench/attention_vs_torch.sh: per P2c case and round, ours and torch's
CUDNN_LSE medians (ms), torch / ours (> 1: ours faster) and FA2 / ours, the geometric mean of
torch / ours, and the clocks and power nvidia-smi saw.

    python3 scripts/bench/attention_table.py DIR
"""
import json
import math
import os
import sys


def ours(path):
    rows = json.load(open(path))["rows"]
    return {r["id"][4:]: (r["median_ms"], r.get("pass", True)) for r in rows
            if r["id"].startswith("P2c.") and r["median_ms"] > 0}


def torch(path, backend):
    j = json.load(open(path))
    return {r["id"]: r["ms"] for r in j["results"] if r["backend"] == backend and r["ms"]}


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: attention_table.py DIR   (the output folder of attention_vs_torch.sh)")
    w = sys.argv[1]
    rounds = [n for n in (1, 2) if os.path.exists(f"{w}/ours.{n}.json") and os.path.exists(f"{w}/torch.{n}.json")]
    if not rounds:
        sys.exit(f"attention_table.py: {w} holds no round with both ours.N.json and torch.N.json")
    print("| case (bf16) | round | ours ms | torch cuDNN ms | torch / ours | torch FA2 ms | FA2 / ours | check |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    ratios = []
    for n in rounds:
        o = ours(f"{w}/ours.{n}.json")
        t = torch(f"{w}/torch.{n}.json", "CUDNN_LSE")
        fa = torch(f"{w}/torch.{n}.json", "FLASH_ATTENTION")
        for cid, (ms, ok) in o.items():
            if cid not in t:
                continue
            ratios.append(t[cid] / ms)
            fa_cells = f"{fa[cid]:.3f} | {fa[cid] / ms:.2f}x" if cid in fa else "- | -"
            print(f"| {cid} | {n} | {ms:.3f} | {t[cid]:.3f} | {t[cid] / ms:.3f}x | {fa_cells} | {'ok' if ok else 'FAILED'} |")
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"torch / ours: geometric mean {gm:.3f}x over {len(ratios)} rows, {min(ratios):.3f}-{max(ratios):.3f}x")
    inputs = {json.load(open(f"{w}/torch.{n}.json")).get("inputs", "bf16-rand") for n in rounds}
    if inputs != {"f32-rand"}:
        print(f"note: torch drew {', '.join(sorted(inputs))} inputs, ours f32-rand: inputs unalike")
    smi = f"{w}/smi.csv"
    if os.path.exists(smi):
        clk, pw = [], []
        for line in open(smi):
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 3 and f[1].endswith("MHz") and f[2].endswith("W"):
                clk.append(int(f[1].split()[0]))
                pw.append(float(f[2].split()[0]))
        if clk:
            print(f"SM clock {min(clk)}..{max(clk)} MHz, power up to {max(pw):.0f} W over {len(clk)} samples")


if __name__ == "__main__":
    main()
