#!/usr/bin/env bash
# One GPU, end of the 2026-12-06 session: the binaries at HEAD (hex literals, the pair checks,
# the crossed-axis refusal of tile, patch's no-gemm-of-probabilities):
#   A. the compiled schedules at 8 virtual ranks, --alias 2 and --alias 8 (gpu.sh parts
#      schedules,aliased), all checked against the single-device patch;
#   B. mercury-mgpu selfcheck --alias 2 (both transports).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-06-final.sh")
source scripts/device_env.sh
C=.carry
w=/tmp/final; rm -rf "$w"; mkdir -p "$w/s"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 330 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "A. schedules+aliased rc=$? ($((SECONDS - t0)) s)" )
echo "A. checks ok: $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -e '---' -e '| case |' | head
timeout 60 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" > "$w/mgpu.txt" 2>&1; echo "B. mgpu selfcheck --alias 2 rc=$? ($((SECONDS - t0)) s)"
grep -iE 'FAIL' "$w/mgpu.txt" | head -3
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
[[ -n "${OUT:-}" ]] && cp "$w/schedules.txt" "$w/mgpu.txt" "$OUT/" || true
