#!/usr/bin/env bash
# One H200 (2026-12-03, third session), after 2026-12-03c-regimes.sh found ours 1-3% behind
# torch's cuDNN on every P2c row when both are timed alike:
#   A. cuDNN's own API log (CUDNN_LOGLEVEL_DBG=3) of the plans each side builds for the S32K
#      causal and non-causal rows: the engine and knobs of each (cudnn-*.log.gz);
#   B. the sustained regime again, both sides, after P2c's inputs took sdpa_baseline.py's
#      value ranges (q, k in [-1.5, 1.5], v in [-1, 1]; they were [-2, 2] for q and k).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03c-engines.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/engines}; mkdir -p "$w"
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG="$w/cudnn-torch.log" timeout 120 python3 $C/sdpa_baseline.py \
  --backends '^CUDNN_LSE$' --cases '^b1h32s32k\.(non)?causal$' --regime back-to-back --warmup 0 --reps 1 \
  --out "$w/torch-log.json" > /dev/null 2> "$w/torch-log.err"; echo "A. torch rc=$?"
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG="$w/cudnn-ours.log" RUST_LOG=debug timeout 120 $C/mercury-gpu-bench \
  --device-kernels-ptx $C/device_kernels.ptx --only P2c --p2c-cases b1h32s32k.causal,b1h32s32k.noncausal \
  --no-check --warmup 0 --reps 1 > "$w/ours-log.txt" 2>&1; echo "A. ours rc=$?"
grep -h 'cuDNN plan for' "$w/ours-log.txt" | cut -c1-300
ls -la "$w"/cudnn-*.log
gzip -f "$w"/cudnn-*.log
OUT=$w/b MERCURY_REGIMES=sustained=1500 bash docs/perf-runs/2026-12-03c-regimes.sh
