#!/usr/bin/env bash
# A/B of the bf16 output delivery (the permutation of a contiguous causal output back from
# zigzag sends bf16): .carry/mercury-run-before-delivery is 4fae440 (staged by scripts/gpu.sh
# there), .carry/mercury-run this tree; .carry/attention_2x4_causal.mlir is
# examples/attention_2x4.mlir with causal = true, its transforms from
#   target/release/mercury-tune .carry/attention_2x4_causal.mlir --topology \
#     topologies/h200-two-tier-2x4-1gpu-measured.toml --refactor-mesh --out .carry/tt-attention_2x4_causal
# Then: run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-01-delivery-ab.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
echo "== two tiers: causal MHA, ring with zigzag placements (output permuted back at the delivery)"
BEFORE=.carry/mercury-run-before-delivery OPS=attention_2x4_causal:.carry/attention_2x4_causal.mlir \
  SCHEDS=mesh_8__L0_ring_zigzag REPS=3 bash docs/perf-runs/2026-12-01-cast-ab-two-tier.sh
echo "== 8 virtual ranks: examples/attention_causal.mlir --shift-shard (zigzag ring, permuted back)"
for rep in 1 2 3; do
  for who in before after; do
    b=.carry/mercury-run; [[ $who == before ]] && b=.carry/mercury-run-before-delivery
    r=$($b --backend cuda --virtual --check --bench --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
      examples/attention_causal.mlir --shift-shard 2>&1); rc=$?
    printf '%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" "$who" "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
      "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" "$(grep -m1 'check @O vs' <<< "$r" | grep -o 'relative error.*')"
  done
done
