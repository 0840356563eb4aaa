#!/usr/bin/env bash
# The cases of issue 13's side-by-side suite, one definition for the GPU run (scripts/gpu.sh,
# part `suite`) and the model's predictions (scripts/suite_predict.sh).
#
#   bash scripts/suite_cases.sh DIR NGPU
#
# Writes each case's operator (and the GEMM schedules sized to NGPU ranks) into DIR and prints
# one line per case: id<TAB>devices<TAB>kernels<TAB>input<TAB>schedule arguments, where
# `kernels` is `device` (the device kernels' PTX) or `mlp` (the MLP's generated kernels too).
# Ids are scripts/baselines' (attn.mha.b1.s32k.causal, gemm.ag.m8192.n8192.k8192, ...).
#   attention: MHA 32 heads and GQA 32/8, D128, B1 at MERCURY_SUITE_SEQS (default 32768 131072;
#     add 524288 for the 512K rows) and B16 at 4K, causal and not, with the schedule
#     --shift-shard picks (causal: inputs and output declared zigzag, the contract of torch's
#     load-balanced context parallelism; the ring is the zigzag one);
#   GEMM: all-gather GEMM and GEMM reduce-scatter, N = K = 8192 with M in MERCURY_SUITE_GEMM_M
#     (default 1K to 16K) and the Llama-3-70B MLP shapes at MERCURY_SUITE_LLAMA_M (K 8192 ->
#     N 28672 and back), with their known schedules (reduce-scatter: shift-reduce, no suffix,
#     .megatron, .halves and .shiftshard);
#   MLP: Llama-3 8B and 70B, M = 8192, TP = 2 (always 2 GPUs): mlp_ag_rs (no suffix),
#     .overlap, .megatron.
set -euo pipefail
dir=${1:?usage: suite_cases.sh DIR NGPU}
n=${2:?usage: suite_cases.sh DIR NGPU}
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$dir"
case_line() { local IFS=$'\t'; echo "$*"; }
for v in mha gqa; do
  src=$root/examples/attention.mlir; [[ $v == gqa ]] && src=$root/examples/attention_gqa.mlir
  for s in ${MERCURY_SUITE_SEQS:-32768 131072}; do
    for c in noncausal causal; do
      f="$dir/$v-$s-$c.mlir"
      sed -e "s/shape \[8\]/shape [$n]/" -e "s/32768/$s/g" "$src" > "$f"
      [[ $c == causal ]] && sed -i -e 's/causal = false/causal = true/' -e 's/S(0)/S(zigzag(0))/g' "$f"
      case_line "attn.$v.b1.s$((s / 1024))k.$c" "$n" device "$f" --shift-shard
    done
  done
done
for v in mha gqa; do
  src=$root/examples/attention.mlir; [[ $v == gqa ]] && src=$root/examples/attention_gqa.mlir
  for c in noncausal causal; do
    f="$dir/$v-b16-$c.mlir"
    sed -e "s/shape \[8\]/shape [$n]/" -e "s/@b = 1 spatial/@b = 16 spatial/" -e "s/32768/4096/g" "$src" > "$f"
    [[ $c == causal ]] && sed -i -e 's/causal = false/causal = true/' -e 's/S(0)/S(zigzag(0))/g' "$f"
    case_line "attn.$v.b16.s4k.$c" "$n" device "$f" --shift-shard
  done
done
for s in asynctp_ag_gemm shift_reduce shift_reduce_halves megatron_rs; do
  sed "s/factor=8/factor=$n/g" "$root/examples/schedules/$s.sched" > "$dir/$s.sched"
done
for g in ag_gemm:asynctp_ag_gemm:ag gemm_rs:shift_reduce:rs; do
  IFS=: read -r ex sc kind <<< "$g"
  gemm_case() {  # id m n k
    sed -e "s/shape \[8\]/shape [$n]/" -e "s/@m = 8192/@m = $2/" -e "s/@n = 8192/@n = $3/" \
      -e "s/@k = 8192/@k = $4/" "$root/examples/$ex.mlir" > "$dir/$1.mlir"
    case_line "$1" "$n" device "$dir/$1.mlir" --schedule "$dir/$sc.sched"
    # The reduce-scatter's other schedule: Megatron (one GEMM per GPU, then a reduce-scatter
    # of bf16 partial sums), the same operator file.
    [[ $kind == rs ]] && case_line "$1.megatron" "$n" device "$dir/$1.mlir" --schedule "$dir/megatron_rs.sched"
    # And shift-reduce in half blocks: on 2 GPUs each GPU's own GEMMs accumulate onto the
    # peer's partial sums, received the stage before (no combine kernel at the end).
    [[ $kind == rs ]] && case_line "$1.halves" "$n" device "$dir/$1.mlir" --schedule "$dir/shift_reduce_halves.sched"
    # And the schedule --shift-shard picks for it (on 2 GPUs: the K blocks of A and B travel
    # around the ring, the output stays put).
    [[ $kind == rs ]] && case_line "$1.shiftshard" "$n" device "$dir/$1.mlir" --shift-shard
    return 0
  }
  for m in ${MERCURY_SUITE_GEMM_M:-1024 2048 4096 8192 16384}; do
    gemm_case "gemm.$kind.m$m.n8192.k8192" "$m" 8192 8192
  done
  for m in ${MERCURY_SUITE_LLAMA_M:-2048 8192 16384}; do
    if [[ $kind == ag ]]; then gemm_case "gemm.ag.llama70b.m$m" "$m" 28672 8192
    else gemm_case "gemm.rs.llama70b.m$m" "$m" 8192 28672; fi
  done
done
for m in 8b 70b; do
  for sc in mlp_ag_rs: mlp_overlap:.overlap mlp_megatron:.megatron; do
    IFS=: read -r s suffix <<< "$sc"
    case_line "mlp.llama3-$m.m8192$suffix" 2 mlp "$root/examples/2gpu/mlp_llama3_$m.mlir" \
      --schedule "$root/examples/schedules/$s.sched"
  done
done
