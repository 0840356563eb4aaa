#!/usr/bin/env bash
# Staging (here, no GPU): bash scripts/gpu.sh; for the A/B also the binary before the cast,
#   git worktree add /tmp/old 124413b && (cd /tmp/old && cargo build --release -p mercury-run \
#     --no-default-features --features cuda) && cp /tmp/old/target/release/mercury-run .carry/mercury-run-before-cast
#   and for the two-tier A/B the transforms: for op in attention_2x4 two_tier/attention_gqa_2x4; do
#     target/release/mercury-tune examples/$op.mlir --topology topologies/h200-two-tier-2x4-1gpu-measured.toml \
#     --refactor-mesh --out .carry/tt-$(basename $op); done
#   and for the gpu checks: target/release/mercury-tune examples/attention_causal_zigzag.mlir --topology h200-1x8 --out .carry/tz
# Then: run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-01-cast-ab-1gpu.sh")
# A/B on one H200, 8 virtual ranks: the output cast to bf16 before the end all-to-all (after)
# against the f32 move (before, commit 124413b), alternated in one call.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
for rep in 1 2 3; do
  for case in "ulysses examples/attention.mlir" "usp examples/attention_2x4.mlir"; do
    set -- $case
    for who in before after; do
      b=.carry/mercury-run; [[ $who == before ]] && b=.carry/mercury-run-before-cast
      r=$($b --backend cuda --virtual --check --bench --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
        $2 --schedule examples/schedules/$1.sched 2>&1)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$1" "$who" \
        "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep -m1 'check @O' <<< "$r" | grep -o 'relative error [^ ]*  *[a-zA-Z]*\|FAIL.*')"
    done
  done
done
