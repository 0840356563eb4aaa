#!/usr/bin/env bash
# A/B of bf16 partial sums in the reduce-scatter, second attempt: the GEMM writes the rank's
# partial sum in bf16 directly (no cast kernel), the copy transport adds bf16 parts into its
# f32 accumulator where they lie (no conversion into scratch), NCCL reduce-scatters bf16.
# .carry/mercury-run-before is 7294c1c (f32 partial sums); .carry/mercury-run-v1 has the bf16
# partial sums with the reduction's f32 accumulator (a cast, then one add kernel per further
# part, then a cast back); .carry/mercury-run adds the one-pass `mercury_sum_bf16` kernel.
# Virtual ranks on one GPU, alternated, 3 repetitions, every run checked against the
# single-device patch; shift-reduce (bf16 partials in both) is the control.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-rs-bf16-direct-ab.sh")
# Second call (all-reduce too, before vs after): AB_AR=1 AB_WHO='before after' bash ...
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
# 2-rank variants of the GEMM reduce-scatter (what the 2-GPU suite runs).
sed 's/shape \[8\]/shape [2]/' examples/gemm_rs.mlir > /tmp/gemm_rs_2.mlir
sed 's/factor=8/factor=2/' examples/schedules/megatron_rs.sched > /tmp/megatron_rs_2.sched
sed 's/factor=8/factor=2/g' examples/schedules/shift_reduce.sched > /tmp/shift_reduce_2.sched
# The all-reduce (output replicated, the same schedule), 8 and 2 ranks. Only with AB_AR=1 (the
# second call of the session, after the all-reduce joined).
sed 's/bf16 out sharding \[S(0), R\]/bf16 out sharding [R, R]/' examples/gemm_rs.mlir > /tmp/gemm_ar.mlir
sed 's/bf16 out sharding \[S(0), R\]/bf16 out sharding [R, R]/' /tmp/gemm_rs_2.mlir > /tmp/gemm_ar_2.mlir
ar=()
[[ ${AB_AR:-} == 1 ]] && ar=(
  "megatron-ar /tmp/gemm_ar.mlir examples/schedules/megatron_rs.sched device_kernels.ptx"
  "megatron-ar-2 /tmp/gemm_ar_2.mlir /tmp/megatron_rs_2.sched device_kernels.ptx"
)
cases=("${ar[@]}" 
  "megatron-rs-2 /tmp/gemm_rs_2.mlir /tmp/megatron_rs_2.sched device_kernels.ptx"
  "shift-reduce-rs-2 /tmp/gemm_rs_2.mlir /tmp/shift_reduce_2.sched device_kernels.ptx"
  "megatron-rs examples/gemm_rs.mlir examples/schedules/megatron_rs.sched device_kernels.ptx"
  "mlp-megatron examples/mlp.mlir examples/schedules/mlp_megatron.sched mlp_kernels.ptx"
  "shift-reduce-rs examples/gemm_rs.mlir examples/schedules/shift_reduce.sched device_kernels.ptx"
)
printf 'rep\tcase\twho\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for c in "${cases[@]}"; do
    read -r name op sched ptx <<< "$c"
    for who in ${AB_WHO:-before v1 after}; do
      b=.carry/mercury-run; [[ $who != after ]] && b=.carry/mercury-run-$who
      r=$($b --backend cuda --virtual --check --bench --iters 20 --warmup 5 \
        --device-kernels .carry/$ptx "$op" --schedule "$sched" 2>&1); rc=$?
      printf '%s\t%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" "$name" "$who" \
        "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" \
        "$(grep -m1 'check @. vs' <<< "$r" | grep -o 'relative error.*')"
      [[ $rc == 0 ]] || tail -5 <<< "$r"
    done
  done
done
