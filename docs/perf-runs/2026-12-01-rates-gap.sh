#!/usr/bin/env bash
# Why the rate tables priced the executor's GEMMs slow: the same patch timed back to back
# (--rates-gap-ms 0) and with the stream drained and 2 ms idle before each call
# (--rates-gap-ms 2), both without the warm-up, then the single-device GEMM plans through the
# executor (mercury-run --bench: 5 iterations with the executor's own host work between them),
# all in one call on one GPU.
# After `bash scripts/gpu.sh` here: run(kind="nvidia-h200", carry=[".carry"],
#   command="bash docs/perf-runs/2026-12-01-rates-gap.sh")
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/rates-out}
mkdir -p "$out"
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
for gap in 0 2; do
  .carry/mercury-mgpu links --measure-rates --rates-warm-s 0 --rates-gap-ms $gap --max-devices 1 \
    --out "$out/topology-rates-gap$gap.toml" > "$out/rates-gap$gap.log" 2>&1 || { echo "gap $gap failed"; tail "$out/rates-gap$gap.log"; }
  grep -E 'R\.gemm\.(512|1024|2048|4096|8192|16384)x(4096|8192)x8192 |R\.attention\.s(4096|16384|32768)|^rates on' "$out/rates-gap$gap.log" | sed "s/^/gap $gap: /"
done
CASES='^gemm' bash docs/perf-runs/2026-12-01-rates.sh --no-rates 2>&1 | tail -20
