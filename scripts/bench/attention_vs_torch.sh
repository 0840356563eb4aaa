#!/usr/bin/env bash
# The attention patch (P2c, cuDNN) against torch's cuDNN attention, both sides timed alike:
# torch's `_scaled_dot_product_cudnn_attention(..., compute_log_sumexp=True)` (CUDNN_LSE: O and
# the LSE, the same work as ours) and FlashAttention-2, on inputs of alike bits (f32-rand: every
# mantissa bit random, as ours), in one regime (docs/perf.md, "Method"). Every row of ours is
# checked in the same run (f32 GPU reference, f64 rows, non-finite O, the NVRTC kernel).
#
#   bash scripts/gpu.sh                       # here: build and stage .carry/
#   run(kind="nvidia-h200", carry=[".carry"], command="bash scripts/bench/attention_vs_torch.sh")
#
# Environment: REGIME (default sustained=1500), ROUNDS (default 1: torch, then ours; 2 adds a
# round with ours first, to show any order effect), CASES (default the 11 timed P2c cases).
# Writes torch.N.json, ours.N.json, ours.N.txt, smi.csv and table.md under $OUT (or
# /tmp/attention-vs-torch) and prints the table: torch / ours per case and round (> 1: ours
# faster), the geometric mean, the clocks seen.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/attention-vs-torch}; mkdir -p "$w"
REGIME=${REGIME:-sustained=1500}
ROUNDS=${ROUNDS:-1}
CASES=${CASES:-b1h32s32k.causal,b1h32s32k.noncausal,gqa32q8kv.s32k.noncausal,gqa32q8kv.s32k.causal,b16h32s4k.noncausal,b16h32s4k.causal,b1h32s32k.d64.noncausal,b1h32s32k.d64.causal,b1h32s32k.d256.noncausal,b1h32s32k.d256.causal,b1h32s4kx4k.noncausal}
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "attention_vs_torch.sh: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$w/gpu.txt"
echo "cuDNN: ${MERCURY_CUDNN_LIB:-unset, the dynamic loader search}; regime $REGIME; $ROUNDS round(s)"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 200 > "$w/smi.csv" &
smi=$!
status=0
torch_side() { # round
  PYTHONUNBUFFERED=1 timeout 300 python3 $C/sdpa_baseline.py --backends '^(CUDNN_LSE|FLASH_ATTENTION)$' \
    --regime "$REGIME" --out "$w/torch.$1.json" > "$w/torch.$1.log" 2>&1 || {
    status=1; echo "torch round $1 failed:"; tail -3 "$w/torch.$1.log"; }
}
ours_side() { # round
  timeout 300 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
    --p2c-cases "$CASES" --regime "$REGIME" --json-out "$w/ours.$1.json" > "$w/ours.$1.txt" 2>&1 || {
    status=1; echo "ours round $1 failed (or a check failed):"; grep -E 'FAIL|error' "$w/ours.$1.txt" | head -5; }
}
torch_side 1; ours_side 1
if (( ROUNDS > 1 )); then ours_side 2; torch_side 2; fi
kill $smi 2> /dev/null
python3 scripts/bench/attention_table.py "$w" | tee "$w/table.md"
exit $status
