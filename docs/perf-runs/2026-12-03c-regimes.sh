#!/usr/bin/env bash
# One H200 (2026-12-03, third session): the P2c rows against torch's cuDNN (CUDNN_LSE: the same
# work, O and LSE), both sides timed in one regime (mercury-gpu-bench --regime and
# scripts/sdpa_baseline.py --regime take the same values and time alike):
#   sustained=1500  the call back to back for 1.5 s, then 7 timed calls (power-limited clocks)
#   idle=2000       2 s idle, then 2 warm-up calls and 7 timed calls (the clocks after a pause)
# Two rounds; torch first in round 1, ours first in round 2, to expose any order bias.
# nvidia-smi samples clocks and power every 200 ms throughout (smi.csv).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03c-regimes.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/regimes}; mkdir -p "$w"
CASES=b1h32s32k.causal,b1h32s32k.noncausal,gqa32q8kv.s32k.noncausal,gqa32q8kv.s32k.causal,b16h32s4k.noncausal,b16h32s4k.causal,b1h32s32k.d64.noncausal,b1h32s32k.d64.causal,b1h32s32k.d256.noncausal,b1h32s32k.d256.causal,b1h32s4kx4k.noncausal
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$w/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$w/smi.csv" &
smi=$!
torch_side() { # regime round
  PYTHONUNBUFFERED=1 timeout 200 python3 $C/sdpa_baseline.py --backends '^CUDNN_LSE$' --regime "$1" \
    --warmup 2 --reps 7 --out "$w/torch.${1/=/-}.$2.json" > /dev/null 2> "$w/torch.${1/=/-}.$2.log"
  echo "torch $1 round $2 rc=$? $(date +%T)"
}
ours_side() { # regime round
  timeout 200 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
    --p2c-cases "$CASES" --regime "$1" --warmup 2 --reps 7 \
    --json-out "$w/ours.${1/=/-}.$2.json" > "$w/ours.${1/=/-}.$2.txt" 2>&1
  echo "ours $1 round $2 rc=$? $(date +%T)"
}
REGIMES=${MERCURY_REGIMES:-sustained=1500 idle=2000}
for regime in $REGIMES; do torch_side $regime 1; ours_side $regime 1; done
for regime in $REGIMES; do ours_side $regime 2; torch_side $regime 2; done
kill $smi 2>/dev/null
grep -h -iE 'FAIL' "$w"/ours.*.txt | head -5
python3 docs/perf-runs/2026-12-03c-regimes-table.py "$w" | tee "$w/table.txt"
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
