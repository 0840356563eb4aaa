#!/usr/bin/env bash
# One H200 (2026-12-03, third session): cuDNN's log showed both sides build the same graph and
# pick the same engine and knob (9 / KERNEL_CFG 7 non-causal, 2 / 7 causal), yet ours times 1-2%
# slower. Does where the memory comes from matter? Ours with the bench's buffers from the
# stream-ordered pool (cuMemAllocAsync, the default; the executor allocates slots the same way)
# and from cuMemAlloc (MERCURY_BENCH_ALLOC=sync, as torch's caching allocator takes segments),
# torch between, all in the sustained regime, order pool, sync, torch, sync, pool, torch.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03c-alloc.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/alloc}; mkdir -p "$w"
CASES=b1h32s32k.noncausal,b1h32s32k.causal,b16h32s4k.noncausal,b1h32s4kx4k.noncausal
RE='^(b1h32s32k\.(non)?causal|b16h32s4k\.noncausal|b1h32s4kx4k\.noncausal)$'
ours() { # tag alloc
  MERCURY_BENCH_ALLOC=$2 timeout 150 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
    --p2c-cases "$CASES" --regime sustained=1500 --warmup 2 --reps 7 \
    --json-out "$w/ours-$1.json" > "$w/ours-$1.txt" 2>&1; echo "ours $1 rc=$?"
}
torch() { # tag
  PYTHONUNBUFFERED=1 timeout 150 python3 $C/sdpa_baseline.py --backends '^CUDNN_LSE$' --cases "$RE" \
    --regime sustained=1500 --warmup 2 --reps 7 --out "$w/torch-$1.json" > /dev/null 2> "$w/torch-$1.log"; echo "torch $1 rc=$?"
}
ours pool1 pool; ours sync1 sync; torch 1; ours sync2 sync; ours pool2 pool; torch 2
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
o = {t: ours(t) for t in ["pool1", "sync1", "sync2", "pool2"]}
t = {k: torch(k) for k in ["1", "2"]}
print("| case | pool r1 | sync r1 | torch r1 | sync r2 | pool r2 | torch r2 | torch/pool | torch/sync |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for c in o["pool1"]:
    pool = (o["pool1"][c] + o["pool2"][c]) / 2
    sync = (o["sync1"][c] + o["sync2"][c]) / 2
    tt = (t["1"][c] + t["2"][c]) / 2
    print(f"| {c} | {o['pool1'][c]:.3f} | {o['sync1'][c]:.3f} | {t['1'][c]:.3f} | {o['sync2'][c]:.3f} | {o['pool2'][c]:.3f} | {t['2'][c]:.3f} | {tt/pool:.3f}x | {tt/sync:.3f}x |")
PY
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
