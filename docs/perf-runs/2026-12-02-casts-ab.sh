#!/usr/bin/env bash
# A/B of the final delivery's casts (one per held f32 tile instead of one per part and
# receiver, c3ccb6c): .carry/mercury-run-before-casts is 1c5eb36 (built like scripts/gpu.sh
# builds mercury-run: `cargo build --release -p mercury-run --no-default-features --features
# cuda` in a worktree at 1c5eb36), .carry/mercury-run this tree (`bash scripts/gpu.sh`).
# 8 virtual ranks on one GPU, alternated, 3 repetitions; then every compiled schedule of
# scripts/gpu.sh re-checked with this tree's lowering.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-casts-ab.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
sed 's/causal = false/causal = true/' examples/attention_b16.mlir > /tmp/attention_b16_causal.mlir
cases=(
  "striped-mha-causal examples/attention_causal.mlir examples/schedules/striped_ring.sched"
  "striped-mha examples/attention.mlir examples/schedules/striped_ring.sched"
  "striped-b16-causal /tmp/attention_b16_causal.mlir examples/schedules/striped_ring.sched"
  "zigzag-mha-causal examples/attention_causal.mlir examples/schedules/zigzag_ring.sched"
)
printf 'rep\tcase\twho\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for c in "${cases[@]}"; do
    read -r name op sched <<< "$c"
    for who in before after; do
      b=.carry/mercury-run; [[ $who == before ]] && b=.carry/mercury-run-before-casts
      r=$($b --backend cuda --virtual --check --bench --iters 10 --warmup 3 \
        --device-kernels .carry/device_kernels.ptx "$op" --schedule "$sched" 2>&1); rc=$?
      printf '%s\t%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" "$name" "$who" \
        "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" \
        "$(grep -m1 'check @O vs' <<< "$r" | grep -o 'relative error.*')"
      [[ $rc == 0 ]] || tail -5 <<< "$r"
    done
  done
done
echo "== every compiled schedule, this tree"
MERCURY_GPU_PARTS=schedules bash scripts/gpu.sh --remote
