#!/usr/bin/env bash
# Everything one GPU can check at HEAD, with the figures of "the ring on virtual ranks" in
# docs/perf.md:
#   A. mercury-gpu-bench P0 (executor self-checks), P2c (the cuDNN patch with its check-only
#      shapes, and the ring steps) and P3 (RingAttention on 8 virtual ranks), back to back;
#   B. the compiled schedules at 8 virtual ranks, then on 2 and 8 device ids aliasing GPU 0
#      (gpu.sh parts schedules,aliased), every one checked against the single-device patch;
#   C. the fault cases on one GPU (gpu.sh part faults: two processes sharing GPU 0 over NCCL's
#      socket transport); only with FAULTS=1 (about 170 s);
#   D. mercury-mgpu selfcheck --alias 2, both transports;
# then counts what is left on the GPU.
#
#   bash scripts/gpu.sh                       # here: build and stage .carry/
#   run(kind="nvidia-h200", carry=[".carry"], command="bash scripts/bench/check.sh")
#
# Summaries and tables under $OUT (or /tmp/bench-check); exit 1 when any part failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/bench-check}; mkdir -p "$w/s" "$w/f"
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "check.sh: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
t0=$SECONDS
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.limit --format=csv,noheader
echo "commit: $(git rev-parse --short HEAD 2> /dev/null || echo unknown); cuDNN: ${MERCURY_CUDNN_LIB:-unset, the dynamic loader search}"
timeout 200 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P0,P2c,P3 \
  --json-out "$w/bench.json" > "$w/bench.txt" 2>&1
rc=$?; (( rc )) && status=1
echo "A. bench P0,P2c,P3 rc=$rc ($((SECONDS - t0)) s); rows failed: $(grep -c FAILED "$w/bench.txt")"
grep -E '^P2c\.ring_step|^P3\.ring8\.(non)?causal(\.peers)? ' "$w/bench.txt" | cut -c1-140
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 360 bash scripts/gpu.sh --remote \
    > "$w/schedules.txt" 2>&1 ) || status=1
echo "B. schedules,aliased ($((SECONDS - t0)) s): $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt") checks ok"
grep -E '^\| ' "$w/schedules.txt" | grep -v -e '| ok |' -e '---' -e '| case |' | head
if [[ ${FAULTS:-0} == 1 ]]; then
  ( OUT=$w/f MERCURY_GPU_PARTS=faults timeout 200 bash scripts/gpu.sh --remote > "$w/faults.txt" 2>&1 ) || status=1
  echo "C. faults ($((SECONDS - t0)) s): $(grep -c -E '^\| .*\| PASS \|' "$w/faults.txt") PASS, $(grep -c -E '^\| .*\| FAIL \|' "$w/faults.txt") FAIL"
fi
timeout 60 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" \
  > "$w/mgpu.txt" 2>&1
rc=$?; (( rc )) && status=1
echo "D. mgpu selfcheck --alias 2 rc=$rc ($((SECONDS - t0)) s)"
grep -iE 'FAIL' "$w/mgpu.txt" | head -3
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
exit $status
