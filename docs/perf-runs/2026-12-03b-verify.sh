#!/usr/bin/env bash
# One H200 (2026-12-03, second session): the binaries after the ninth new-user pass's fixes
# (stored/reduced tiles one partition per rank, real per-dimension positions for causal masks)
# and the P2c ring step timed alternating against the plain cuDNN call:
#   A. the compiled schedules at 8 virtual ranks, --alias 2 and --alias 8 (gpu.sh parts
#      schedules,aliased): none may be refused by the new rules, all checked;
#   B. P2c (every cuDNN row; the ring-step rows timed alternating);
#   C. mercury-mgpu selfcheck --alias 2.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03b-verify.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/verify}; mkdir -p "$w/s"
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 300 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "A. schedules+aliased rc=$?" )
echo "A. checks ok: $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -e '---' -e '| case |' | head
timeout 200 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
  --json-out "$w/bench.json" > "$w/bench.txt" 2>&1; echo "B. P2c rc=$?"
grep -E "^  P2c\.ring_step" "$w/bench.txt" | cut -c1-400
grep -ciE "failed" "$w/bench.txt" | sed 's/^/B. lines with FAILED: /'
timeout 100 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" > "$w/mgpu.txt" 2>&1; echo "C. mgpu selfcheck --alias 2 rc=$?"
grep -iE 'FAIL|passed|rows ok' "$w/mgpu.txt" | tail -3
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
mkdir -p "$OUT" 2>/dev/null && cp -r "$w"/*.txt "$OUT/" 2>/dev/null || true
