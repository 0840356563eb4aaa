#!/usr/bin/env bash
# Staging (here, no GPU): bash scripts/gpu.sh; for the A/B also the binary before the cast,
#   git worktree add /tmp/old 124413b && (cd /tmp/old && cargo build --release -p mercury-run \
#     --no-default-features --features cuda) && cp /tmp/old/target/release/mercury-run .carry/mercury-run-before-cast
#   and for the two-tier A/B the transforms: for op in attention_2x4 two_tier/attention_gqa_2x4; do
#     target/release/mercury-tune examples/$op.mlir --topology topologies/h200-two-tier-2x4-1gpu-measured.toml \
#     --refactor-mesh --out .carry/tt-$(basename $op); done
#   and for the gpu checks: target/release/mercury-tune examples/attention_causal_zigzag.mlir --topology h200-1x8 --out .carry/tz
# Then: run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-01-cast-ab-two-tier.sh")
# A/B on one H200, two processes x 4 virtual ranks, NCCL socket between them (the two-tier
# machine of docs/perf.md): flat Ulysses (its output all-to-all crosses the slow tier) and USP,
# the output cast to bf16 before the end all-to-all (after) against the f32 move (before).
# REPS (2), OPS, SCHEDS select; the USP re-run: REPS=4 OPS=attention_2x4:examples/attention_2x4.mlir
# SCHEDS=mesh_2x4__L0_ring_L1_heads. BEFORE: the binary of the 'before' column. The delivery A/B:
# BEFORE=.carry/mercury-run-before-delivery (4fae440) OPS=attention_2x4_causal:.carry/attention_2x4_causal.mlir
# SCHEDS=mesh_8__L0_ring_zigzag REPS=3, after .carry/attention_2x4_causal.mlir (examples/attention_2x4.mlir
# with causal = true) and its transforms in .carry/tt-attention_2x4_causal.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=$(mktemp -d)
pair() {  # name binary op transform
  local name=$1 b=$2 op=$3 t=$4
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MERCURY_NCCL_ID_FILE=$w/id.$name NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
      NCCL_SOCKET_IFNAME=lo NCCL_HOSTID=mercury-node$r timeout -s KILL 200 $b --backend cuda --launcher env --virtual \
      --transport nccl --check --bench --warmup 2 --iters 5 --device-kernels .carry/device_kernels.ptx $op --schedule $t \
      > $w/$name-r$r.log 2>&1 &
  done
  wait; rm -f $w/id.$name
  local t0 t1 ok
  t0=$(grep -m1 '| schedule,' $w/$name-r0.log | awk -F'|' '{print $3}' | xargs)
  t1=$(grep -m1 '| schedule,' $w/$name-r1.log | awk -F'|' '{print $3}' | xargs)
  ok=$(grep -c 'check @O.*ok' $w/$name-r0.log $w/$name-r1.log | awk -F: '{s+=$2} END{print s}')
  printf '%s\t%s | %s\tchecks ok: %s\n' "$name" "$t0" "$t1" "$ok"
  [[ -n $t0 ]] || tail -3 $w/$name-r0.log
}
for rep in $(seq "${REPS:-2}"); do
  for op in ${OPS:-attention_2x4:examples/attention_2x4.mlir attention_gqa_2x4:examples/two_tier/attention_gqa_2x4.mlir}; do
    IFS=: read -r n f <<< "$op"
    for s in ${SCHEDS:-mesh_8__L0_heads mesh_2x4__L0_ring_L1_heads}; do
      for who in before after; do
        b=.carry/mercury-run; [[ $who == before ]] && b=${BEFORE:-.carry/mercury-run-before-cast}
        pair "$rep.$n.$s.$who" $b $f .carry/tt-$n/templates/$s.transform
      done
    done
  done
done
