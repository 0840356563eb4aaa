#!/usr/bin/env bash
# A/B of the chunked GEMM reduce-scatter's reduces overlapping the GEMMs (each tile reduced in
# the stage after its GEMM, beside the next tile's, instead of every reduce after the last
# tile). .carry/mercury-run-before is ccacf4e; .carry/mercury-run is the change. One H200:
# virtual ranks and aliased device ids (--alias 2: peer-copy code, one GPU), alternated,
# 3 repetitions, every run checked against the single-device patch; megatron-rs is the
# control. Then the new plan over NCCL in two processes on the one GPU (socket transport):
# ncclReduce on the transfer stream beside cuBLAS on the compute stream, checked.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-night-chunked-overlap-ab.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=${TMPDIR:-/tmp}/chunked-ab; mkdir -p "$w"
sed 's/shape \[8\]/shape [2]/' examples/gemm_rs.mlir > "$w/gemm_rs_2.mlir"
sed 's/factor=8/factor=2/' examples/schedules/megatron_rs.sched > "$w/megatron_2.sched"
for f in 2 4 8; do
  sed "s/axis=k factor=8/axis=k factor=2/; s/axis=m factor=8/axis=m factor=$f/" \
    examples/schedules/chunked_rs.sched > "$w/chunked_2_m$f.sched"
done
cases=(
  "megatron-rs-8 examples/gemm_rs.mlir examples/schedules/megatron_rs.sched"
  "chunked-rs-8 examples/gemm_rs.mlir examples/schedules/chunked_rs.sched"
  "megatron-rs-2 $w/gemm_rs_2.mlir $w/megatron_2.sched"
  "chunked-rs-2-m2 $w/gemm_rs_2.mlir $w/chunked_2_m2.sched"
  "chunked-rs-2-m4 $w/gemm_rs_2.mlir $w/chunked_2_m4.sched"
  "chunked-rs-2-m8 $w/gemm_rs_2.mlir $w/chunked_2_m8.sched"
)
printf 'rep\tcase\tplace\twho\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for c in "${cases[@]}"; do
    read -r name op sched <<< "$c"
    for place in virtual alias2; do
      [[ $place == virtual ]] && pl=(--virtual) || pl=(--alias 2)
      for who in before after; do
        b=.carry/mercury-run; [[ $who != after ]] && b=.carry/mercury-run-$who
        r=$($b --backend cuda "${pl[@]}" --check --bench --iters 20 --warmup 5 \
          --device-kernels .carry/device_kernels.ptx "$op" --schedule "$sched" 2>&1); rc=$?
        printf '%s\t%s\t%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" "$name" "$place" "$who" \
          "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
          "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" \
          "$(grep -m1 'check @. vs' <<< "$r" | grep -o 'relative error.*')"
        [[ $rc == 0 ]] || tail -5 <<< "$r"
      done
    done
  done
done
echo
echo "NCCL, two processes on one GPU (socket), 4096 x 8192 x 8192, the new plan:"
timeout 200 bash docs/perf-runs/2026-12-02-nccl-reduce-2proc.sh
