#!/usr/bin/env bash
# A/B of the Megatron reduce-scatter in bf16 (a bf16 output's partial sums cast before the
# scatter; NOT landed, it lost): .carry/mercury-run-before-casts is 1c5eb36 (f32 partial
# sums), .carry/mercury-run is 13daaad with docs/perf-runs/2026-12-02-rs-bf16.patch applied
# (`git apply` it, then `cargo build --release -p mercury-run --no-default-features --features
# cuda` and copy target/release/mercury-run). Virtual ranks on one GPU, alternated, 3
# repetitions, every run checked against the single-device patch; shift-reduce (bf16 partials
# in both) is the control.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-rs-bf16-ab.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
cases=(
  "megatron-rs examples/gemm_rs.mlir examples/schedules/megatron_rs.sched device_kernels.ptx"
  "mlp-megatron examples/mlp.mlir examples/schedules/mlp_megatron.sched mlp_kernels.ptx"
  "shift-reduce-rs examples/gemm_rs.mlir examples/schedules/shift_reduce.sched device_kernels.ptx"
)
printf 'rep\tcase\twho\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for c in "${cases[@]}"; do
    read -r name op sched ptx <<< "$c"
    for who in before after; do
      b=.carry/mercury-run; [[ $who == before ]] && b=.carry/mercury-run-before-casts
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
