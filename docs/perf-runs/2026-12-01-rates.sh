#!/usr/bin/env bash
# The patches' rate tables, and the cost model checked against them on the same GPU in the same
# call: `mercury-mgpu links --measure-rates` on GPU 0 writes $OUT/topology-rates.toml (the local
# copy and the rate tables), then every case of the side-by-side suite sized for ONE device
# (scripts/suite_cases.sh DIR 1: the single-device plans, no links involved) runs checked and
# benchmarked with `--predict` on that file. Without tables the same plans are priced here
# (no GPU) with `mercury-run --no-run --predict FILE-WITHOUT-TABLES`.
# After `bash scripts/gpu.sh` here: run(kind="nvidia-h200", carry=[".carry"],
#   command="bash docs/perf-runs/2026-12-01-rates.sh")
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/rates-out}
mkdir -p "$out"
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
# --no-rates: use $OUT/topology-rates-gap${GAP:-2}.toml written before (the -gap script).
if [[ ${1:-} == --no-rates ]]; then
  cp "$out/topology-rates-gap${GAP:-2}.toml" "$out/topology-rates.toml"
else
  .carry/mercury-mgpu links --measure-rates --max-devices 1 --out "$out/topology-rates.toml" > "$out/rates.log" 2>&1 \
    || { echo "rates failed"; tail -20 "$out/rates.log"; exit 1; }
  grep -E '^  R\.attention|R\.gemm\.(512|1024|2048|4096|8192|16384)x8192x8192|^rates on|^gemm_tflops|^attention' "$out/rates.log"
fi
gen=$(mktemp -d)
bash scripts/suite_cases.sh "$gen" 1 > "$gen/cases.tsv"
printf 'case\tmeasured_ms\tpredicted_ms\tcheck\n' > "$out/single.tsv"
while IFS=$'\t' read -r -a c <&3; do
  id=${c[0]}
  [[ $id == mlp* ]] && continue
  [[ -n ${CASES:-} && ! $id =~ $CASES ]] && continue
  log="$out/single-$id.log"
  timeout 120 .carry/mercury-run --backend cuda --devices 1 --check --bench --iters 5 --warmup 2 \
    --device-kernels .carry/device_kernels.ptx --predict "$out/topology-rates.toml" "${c[3]}" "${c[@]:4}" > "$log" 2>&1
  rc=$?
  ms=$(grep '^| schedule,' "$log" | awk -F'|' '{print $3}' | xargs)
  pred=$(grep -m1 '^model: predicted' "$log" | awk '{print $3}')
  chk=$(grep -m1 'check @' "$log" | grep -o 'relative error [^ ]*' || echo "rc=$rc")
  printf '%s\t%s\t%s\t%s\n' "$id" "${ms:-nan}" "${pred:-nan}" "$chk" | tee -a "$out/single.tsv"
done 3< "$gen/cases.tsv"
