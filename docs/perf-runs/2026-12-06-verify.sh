#!/usr/bin/env bash
# One GPU (2026-12-06; written for nvidia-h100-x1, which was lent but did not start twice, and
# run on nvidia-h200): the single-GPU parts of the GPU script at HEAD:
#   A. mercury-gpu-bench P0 (executor self-checks), P2c (the cuDNN patch, checked shapes
#      included) and P3 (ring steps and the ring on virtual ranks), back to back (no torch);
#   B. the compiled schedules at 8 virtual ranks, checked (gpu.sh part schedules);
#   C. the fault cases on one GPU (gpu.sh part faults: two processes sharing GPU 0 over NCCL's
#      socket transport; the one-process case on --alias 2);
#   D. mercury-mgpu selfcheck --alias 2 (both transports).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-06-verify.sh")
source scripts/device_env.sh
C=.carry
w=/tmp/verify; rm -rf "$w"; mkdir -p "$w/s" "$w/f"  # only summaries go to $OUT (few files return)
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.limit --format=csv,noheader
echo "cuDNN: ${MERCURY_CUDNN_LIB:-not found}"
timeout 170 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P0,P2c,P3 \
  --json-out "$w/bench.json" > "$w/bench.log" 2>&1
echo "A. bench rc=$? ($((SECONDS - t0)) s); rows failed: $(grep -c 'FAILED' "$w/bench.log")"
( OUT=$w/s MERCURY_GPU_PARTS=schedules timeout 110 bash scripts/gpu.sh --remote \
    > "$w/schedules.txt" 2>&1; echo "B. schedules rc=$? ($((SECONDS - t0)) s)" )
echo "B. checks ok: $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt")"
( OUT=$w/f MERCURY_GPU_PARTS=faults timeout 170 bash scripts/gpu.sh --remote \
    > "$w/faults.txt" 2>&1; echo "C. faults rc=$? ($((SECONDS - t0)) s)" )
grep -E '^\| .*\| (PASS|FAIL|SKIPPED) \|' "$w/faults.txt" | cut -c1-200
timeout 45 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" \
  > "$w/mgpu.txt" 2>&1; echo "D. mgpu selfcheck --alias 2 rc=$? ($((SECONDS - t0)) s)"
grep -iE 'FAIL|passed|rows ok' "$w/mgpu.txt" | tail -3
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
if [[ -n "${OUT:-}" ]]; then
  cp "$w/bench.log" "$w/bench.json" "$w/schedules.txt" "$w/faults.txt" "$w/mgpu.txt" "$OUT/" 2>/dev/null
  cp "$w/f/faults.log" "$OUT/faults-logs.txt" 2>/dev/null
fi
true
