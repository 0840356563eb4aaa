#!/usr/bin/env bash
# The GEMM patch (P1: cuBLASLt, 8192^3 bf16, f32 accumulate) against `cublasGemmEx`, each row
# checked, in two regimes, three repetitions: back to back (the clocks of a steady load) and
# after an idle gap and 2 s of load (the power-limited regime, where single rows of either side
# land several percent apart; docs/perf.md, "Method").
#
#   bash scripts/gpu.sh                       # here: build and stage .carry/
#   run(kind="nvidia-h200", carry=[".carry"], command="bash scripts/bench/gemm_vs_cublas.sh")
#
# Environment: REPS (default 3), REGIMES (default "back-to-back idle=2000,sustained=2000"),
# SIZE (M = N = K, default 8192). Logs under $OUT (or /tmp/gemm-vs-cublas).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/gemm-vs-cublas}; mkdir -p "$w"
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gemm_vs_cublas.sh: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
status=0
echo "| rep | regime | cublasGemmEx ms | patch ms | patch / cuBLAS (>1: faster) | check |"
echo "| ---: | --- | ---: | ---: | ---: | --- |"
for rep in $(seq "${REPS:-3}"); do
  for reg in ${REGIMES:-back-to-back idle=2000,sustained=2000}; do
    log="$w/p1.$rep.${reg//[=,]/-}.txt"
    timeout 120 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P1 \
      --gemm-size "${SIZE:-8192}" --regime "$reg" > "$log" 2>&1 || status=1
    base=$(awk '$1 == "P1.cublas_gemmex_bf16" {print $2}' "$log")
    row=$(grep -E '^P1\.patch_bf16_out ' "$log")
    check=$(grep -q FAILED "$log" && echo FAILED || echo ok)
    echo "| $rep | $reg | ${base:--} | $(awk '{print $2}' <<< "$row") | $(grep -o '[0-9.]*x cuBLAS' <<< "$row" | cut -d' ' -f1) | $check |"
  done
done
exit $status
