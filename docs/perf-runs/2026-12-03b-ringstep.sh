#!/usr/bin/env bash
# 2026-12-03 (second session): where a ring step's excess over the plain cuDNN call goes.
# P2c.ring_step.* now also times the step's cuDNN call and merge apart (events between them)
# and the plain call again after the step. Run on one H200 after `bash scripts/gpu.sh` here:
#   run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03b-ringstep.sh")
set -uo pipefail
source scripts/device_env.sh
out="${OUT:-/tmp/ringstep}"; mkdir -p "$out"
C=.carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
command -v nsys ncu || echo "no nsys / ncu on this machine"
timeout 500 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
  --json-out "$out/bench.json" > "$out/bench.log" 2>&1; echo "bench exit $?"
grep -E "ring_step|FAIL|error" "$out/bench.log" | head -20
grep -E "^\| *P2c\.(perf|b1h32s32k|b16)" "$out/bench.log" | head -12
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
