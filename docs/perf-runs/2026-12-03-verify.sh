#!/usr/bin/env bash
# One H200 (2026-12-03): the binaries after this session's fixes (the plan verifier's new
# refusals, NaN never matching in --check, temps followed by the mask rules and skipped with
# their stores, private temps under parallelize and shift) through:
#   A. the compiled schedules at 8 virtual ranks, --alias 2 and --alias 8 (gpu.sh parts
#      schedules,aliased), with the two new matrix-vector rows (examples/weighted_sum.mlir);
#   B. mercury-tune --profile-top 4 on the matrix-vector product (4 virtual ranks) and on the
#      2-rank GEMM reduce-scatter (2 virtual ranks), every profiled candidate checked;
#   C. mercury-mgpu selfcheck --alias 2 (peer copies and NCCL on one GPU).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03-verify.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/verify}; mkdir -p "$w/s" "$w/t"
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 300 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "A. schedules+aliased rc=$?" )
echo "A. checks ok: $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -e '---' -e '| case |' | head
grep -E '^\| gemv' "$w/schedules.txt"
( OUT=$w/t MERCURY_GPU_PARTS=tune MERCURY_GPU_CASES='gemv|rs-gemm-8192-2virtual' timeout 170 bash scripts/gpu.sh --remote > "$w/tune.txt" 2>&1; echo "B. tune rc=$?" )
grep -E '^\| (gemv|rs-gemm)|^   (chosen|searched|warning|error)' "$w/tune.txt"
timeout 100 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" > "$w/mgpu.txt" 2>&1; echo "C. mgpu selfcheck --alias 2 rc=$?"
grep -iE 'FAIL|passed|rows ok' "$w/mgpu.txt" | tail -4
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
mkdir -p "$OUT" 2>/dev/null && cp -r "$w"/*.txt "$OUT/" 2>/dev/null || true
