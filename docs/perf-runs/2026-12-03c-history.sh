#!/usr/bin/env bash
# One H200 (2026-12-03, third session). In the regimes call torch's SDPA script ran all its
# cases in one continuous burst (12 s at 1710 MHz), while ours idled between cases (the
# checks) and met each case's 1.5 s of load with the clock controller still settling
# (1665-1695 MHz): same engine, same allocation kind (2026-12-03c-alloc.sh), different history.
# Here both sides give every case the same history: 3 s idle, then 6 s of the call back to
# back, then 7 timed calls (--regime idle=3000,sustained=6000). Order torch, ours, ours, torch;
# nvidia-smi samples clocks and power every 200 ms (smi.csv).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03c-history.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/history}; mkdir -p "$w"
G=idle=3000,sustained=6000
CASES=b1h32s32k.noncausal,b1h32s32k.causal,b1h32s4kx4k.noncausal
RE='^(b1h32s32k\.(non)?causal|b1h32s4kx4k\.noncausal)$'
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$w/smi.csv" &
smi=$!
ours() {
  timeout 150 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
    --p2c-cases "$CASES" --regime "$G" --warmup 2 --reps 7 \
    --json-out "$w/ours-$1.json" > "$w/ours-$1.txt" 2>&1; echo "ours $1 rc=$? $(date +%T.%N | cut -c1-12)"
}
torch() {
  PYTHONUNBUFFERED=1 timeout 150 python3 $C/sdpa_baseline.py --backends '^CUDNN_LSE$' --cases "$RE" \
    --regime "$G" --warmup 2 --reps 7 --out "$w/torch-$1.json" > /dev/null 2> "$w/torch-$1.log"; echo "torch $1 rc=$? $(date +%T.%N | cut -c1-12)"
}
echo "start $(date +%T.%N | cut -c1-12)"
torch 1; ours 1; ours 2; torch 2
kill $smi 2>/dev/null
grep -h FAIL "$w"/ours-*.txt | head -3
python3 - "$w" <<'PY'
import sys
w = sys.argv[1]
sys.path.insert(0, "docs/perf-runs")
import p2c_sides
def ours(t):
    return p2c_sides.ours(f"{w}/ours-{t}.json")
def torch(t):
    return p2c_sides.torch(f"{w}/torch-{t}.json")
o1, o2, t1, t2 = ours(1), ours(2), torch(1), torch(2)
print("| case | torch r1 | ours r1 | ours r2 | torch r2 | torch/ours (means) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for c in o1:
    print(f"| {c} | {t1[c]:.3f} | {o1[c]:.3f} | {o2[c]:.3f} | {t2[c]:.3f} | {(t1[c] + t2[c]) / (o1[c] + o2[c]):.3f}x |")
PY
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
