#!/usr/bin/env bash
# One H200 (2026-12-02 late session): the executor's construction (executor/build.rs), the
# NCCL transport's phase A (nccl/mod.rs, one function per collective kind) and mercury-mgpu's
# arguments (moved onto clap) were carved or rewritten without a behaviour change; this call
# re-runs what exercises them, checked:
#   A. the compiled schedules at 8 virtual ranks, --alias 2 and --alias 8 (gpu.sh parts
#      schedules,aliased): every construction path of one process;
#   B. every NCCL collective kind the lowering emits (reduce-scatter, reduce, all-gather,
#      all-to-all, all-reduce with lse merge) and point-to-point messages, in two processes on
#      the one GPU over NCCL's loopback socket (scripts/device_env.sh nccl_pair), each run
#      checked against the single-device patch in both processes;
#   C. an injected device hang on virtual ranks (the hang word) and mercury-mgpu selfcheck
#      --alias 2 (peer copies and NCCL on one GPU).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-late-verify.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/verify}; mkdir -p "$w/s" "$w/p"
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 300 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "A. schedules+aliased rc=$?" )
echo "A. checks ok: $(grep -c '| ok |' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -- '---' | head

# B. inputs: 2-rank forms of the examples and schedules.
p=$w/p
sed 's/shape \[8\]/shape [2]/; s/@m = 8192/@m = 4096/' examples/gemm_rs.mlir > "$p/gemm_rs_2.mlir"
sed 's/shape \[8\]/shape [2]/; s/@m = 8192/@m = 4096/' examples/ag_gemm.mlir > "$p/ag_gemm_2.mlir"
sed 's/shape \[8\]/shape [2]/; s/= 32768/= 8192/g' examples/attention.mlir > "$p/att_2.mlir"
for f in megatron_rs chunked_rs shift_reduce shift_reduce_halves asynctp_ag_gemm ulysses context_parallel tree_attention; do
  sed 's/factor=8/factor=2/g' "examples/schedules/$f.sched" > "$p/$f.sched"
done
sed -i 's/axis=m factor=2/axis=m factor=4/' "$p/chunked_rs.sched"
cases=(
  "gemm_rs_2 megatron_rs"          # ReduceScatter
  "gemm_rs_2 chunked_rs"           # Reduce to each tile's owner
  "gemm_rs_2 shift_reduce"         # messages of partial sums
  "gemm_rs_2 shift_reduce_halves"
  "ag_gemm_2 asynctp_ag_gemm"      # ring messages
  "att_2 ulysses"                  # AllToAll
  "att_2 context_parallel"         # AllGather
  "att_2 tree_attention"           # AllGather + AllReduce(lse merge)
  "att_2 --shift-shard"            # the ring
)
printf 'B. case\tours ms\tsingle ms\trc0 rc1\tcheck (process 0)\tcheck (process 1)\n'
for c in "${cases[@]}"; do
  read -r f s <<< "$c"
  if [[ $s == --* ]]; then sched=("$s"); else sched=(--schedule "$p/$s.sched"); fi
  name="$f.${s#--}"
  nccl_pair "$p" "$name" 150 "$C/mercury-run" --backend cuda --launcher env --transport nccl \
    --check --bench --iters 5 --warmup 2 --device-kernels "$C/device_kernels.ptx" \
    "$p/$f.mlir" "${sched[@]}" || true
  l="$p/$name-r0.log"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" \
    "$(grep '| schedule,' "$l" | awk -F'|' '{print $3}' | xargs)" \
    "$(grep '| schedule,' "$l" | awk -F'|' '{print $5}' | xargs)" "$pair_rc" \
    "$(grep -m1 'check @' "$l" | grep -o 'relative error [^ ]*  *[a-z(]*')" \
    "$(grep -m1 'check @' "$p/$name-r1.log" | grep -o 'relative error [^ ]*  *[a-z(]*')"
  [[ $pair_rc == "0 0" ]] || { tail -3 "$l"; tail -3 "$p/$name-r1.log"; }
done

# C. a device hang on virtual ranks, then the multi-GPU self-checks on one GPU.
s0=$SECONDS
timeout 60 "$C/mercury-run" --backend cuda --virtual --check --device-kernels "$C/device_kernels.ptx" \
  "$p/att_2.mlir" --shift-shard --inject-fault hang-rank=1@stage=2 --stage-timeout 5 > "$w/hang.log" 2>&1
rc=$?
echo "C. hang: rc=$rc after $((SECONDS - s0)) s: $(grep -m1 'error:' "$w/hang.log" | cut -c1-220)"
timeout 200 "$C/mercury-mgpu" selfcheck --alias 2 --transport both > "$w/mgpu.txt" 2>&1
echo "C. mgpu selfcheck --alias 2 rc=$?"; tail -6 "$w/mgpu.txt"
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/C. processes left on the GPU: /'
