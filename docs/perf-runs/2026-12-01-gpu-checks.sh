#!/usr/bin/env bash
# Staging (here, no GPU): bash scripts/gpu.sh; for the A/B also the binary before the cast,
#   git worktree add /tmp/old 124413b && (cd /tmp/old && cargo build --release -p mercury-run \
#     --no-default-features --features cuda) && cp /tmp/old/target/release/mercury-run .carry/mercury-run-before-cast
#   and for the two-tier A/B the transforms: for op in attention_2x4 two_tier/attention_gqa_2x4; do
#     target/release/mercury-tune examples/$op.mlir --topology topologies/h200-two-tier-2x4-1gpu-measured.toml \
#     --refactor-mesh --out .carry/tt-$(basename $op); done
#   and for the gpu checks: target/release/mercury-tune examples/attention_causal_zigzag.mlir --topology h200-1x8 --out .carry/tz
# Then: run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-01-gpu-checks.sh")
# 2026-12-01 evening, one H200: the session's GPU checks (see the closing note).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
o=${OUT:-/tmp/o}; mkdir -p "$o"
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
t0=$(date +%s)
echo "== A: schedules on 8 virtual ranks (bf16 output cast before the end all-to-all; K/V replication)"
MERCURY_GPU_PARTS=schedules MERCURY_GPU_CASES='^(ulysses|ulysses-kv-replicated|usp-2x4|context-parallel|tree-attention|ring-mha|mlp-ag-rs)$' \
  OUT=$o/a bash scripts/gpu.sh --remote > $o/a.log 2>&1; echo "rc=$?"; grep -A12 '^== summary' $o/a.log
echo "== B: Ulysses from the search on a zigzag-declared causal operator (+ --predict)"
.carry/mercury-run --backend cuda --virtual --check --bench --iters 5 --warmup 2 --device-kernels .carry/device_kernels.ptx \
  examples/attention_causal_zigzag.mlir --schedule .carry/tz/templates/mesh_8__L0_heads.transform --predict h200-1x8 > $o/b.log 2>&1
echo "rc=$?"; grep -E 'check|schedule|single|model' $o/b.log | grep -v '^//'
echo "== C: two processes, one rank each (launcher): run, tune, --cache-file"
MERCURY_GPU_PARTS=twotier MERCURY_GPU_CASES=perrank OUT=$o/c bash scripts/gpu.sh --remote > $o/c.log 2>&1; echo "rc=$?"
grep -E '^   \| one rank|^==' $o/c.log | cut -c1-300
grep -h 'cache' $o/c/twotier/perrank-cache-r*.log 2>/dev/null | cut -c1-300
echo "total $(( $(date +%s) - t0 )) s"
