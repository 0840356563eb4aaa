#!/usr/bin/env bash
# Records what the cost model predicts for many plans, so that a change to the simulator
# (passes/search/src/sim) can be checked against the binaries from before it.
#
#   bash scripts/sim_compare.sh BIN_DIR OUT_DIR      # run mercury-run / mercury-tune from BIN_DIR
#   python3 scripts/sim_compare.py OLD_OUT NEW_OUT   # compare two such directories
#   bash scripts/sim_compare.sh --inputs OUT_DIR     # only write the generated inputs (below)
#   bash scripts/sim_compare.sh --help               # this text
#
# BIN_DIR must hold executable mercury-run and mercury-tune (else an error, nothing run), and
# sim_compare.py refuses a directory with a case that did not run (exit 127 or 126).
#
# Cases (every one `mercury-run --no-run --predict TOPO --predict-trace` or `mercury-tune`):
# - every example operator (examples/, small/, 2gpu/, two_tier/) with no schedule, with
#   --shift-shard and with every examples/schedules/*.sched (combinations that do not compile
#   are recorded as errors and must fail alike), each on the topologies its rank count fits;
# - the side-by-side suite's cases (scripts/suite_cases.sh) sized for 2, 4, 8 and 16 GPUs;
# - small GEMMs on [N] meshes, every combination of shapes (N x 1 x N, N x N x 1, 1 x N x N,
#   N x N x N) and shardings of A, B, C ([S(0), R], [R, S(0)], [R, R]) with --shift-shard, for
#   N = 4, 8, 16; the N x N x 1 GEMM with replicated C (the ring's scaling input, gsN in
#   docs/perf.md) up to N = 128 on generated h100-(N/8)x8 topologies;
# - mercury-tune on a few operators and topologies (candidates.json, the chosen trace).
# Each case leaves CASE.out (stdout and stderr, exit status last) and, for --predict, CASE.json
# (the model's Chrome trace: the predicted latency and every op's start and duration in full
# precision). Generated inputs and topologies are under OUT_DIR/in: gsN.mlir for N = 32 to 512
# (docs/perf.md times `--predict` of the larger ones) and h100-(N/8)x8.toml.
set -uo pipefail
usage="usage: sim_compare.sh BIN_DIR OUT_DIR, or sim_compare.sh --inputs OUT_DIR (--help: more)"
# fail MESSAGE: a usage error, before any case runs. Without it a BIN_DIR that does not exist
# (or lacks the binaries) recorded every case as `exit 127`, alike in both directories.
fail() { echo "sim_compare.sh: error: $1" >&2; echo "$usage" >&2; exit 1; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  # The usage: the comment above, without its '#'.
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
  exit 0
fi
(( $# == 2 )) || fail "2 arguments expected, $# given"
inputs_only=0
if [[ $1 == --inputs ]]; then
  inputs_only=1 bin=
else
  [[ $1 != -* ]] || fail "unknown option '$1'"
  [[ -d $1 ]] || fail "BIN_DIR '$1' is not a directory"
  bin=$(cd "$1" && pwd)
  for tool in mercury-run mercury-tune; do
    [[ -f $bin/$tool && -x $bin/$tool ]] || fail "BIN_DIR '$1' has no executable $tool"
  done
fi
out=$2
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out/in"
out=$(cd "$out" && pwd)
cd "$root"
run=$bin/mercury-run tune=$bin/mercury-tune
n_cases=0

# topologies FOR RANKS: the topologies a plan of that many ranks is priced on.
topos_for() {
  case $1 in
    2) echo "h200-1x2-measured.toml h100-1x8 h100-2x4" ;;
    4) echo "h100-1x4 h100-2x2 h100-4x1" ;;
    8) echo "h100-1x8 h100-2x4 h200-1x8 a100-2x4 l4-2x4 h100-4x2 h200-two-tier-2x4-1gpu-measured.toml h100-2x8" ;;
    16) echo "h100-2x8 h100-4x4" ;;
    *) echo "$out/in/h100-$(($1 / 8))x8.toml" ;;
  esac
}
topo_arg() { [[ $1 == *.toml && $1 != /* ]] && echo "topologies/$1" || echo "$1"; }

# predict NAME RANKS ARGS...: the plan of ARGS priced on every topology for RANKS.
predict() {
  local name=$1 ranks=$2; shift 2
  local t
  for t in $(topos_for "$ranks"); do
    local c="$out/$name@$(basename "$t" .toml)"
    "$run" "$@" --backend cpu --no-run --predict "$(topo_arg "$t")" --predict-trace "$c.json" \
      > "$c.out" 2>&1
    echo "exit $?" >> "$c.out"
    n_cases=$((n_cases + 1))
  done
}

# ranks_of ARGS...: the plan's rank count (empty when it does not compile).
ranks_of() {
  "$run" "$@" --backend cpu --no-run 2>/dev/null | sed -n 's/^\/\/ comm-plan @[^:]*: mesh \[[^]]*\], \([0-9]*\) ranks.*/\1/p' | head -1
}

# gemm N M K NN A B C: a GEMM C[M, NN] = A[M, K] B[K, NN] of f32 on a [N] mesh, with the
# shardings A, B, C.
gemm() {  # N M K NN A B C
  cat <<EOF
commir.mesh @mesh shape [$1] names ["gpu"] bandwidth [450.0]

commir.kernel @gs on @mesh {
  commir.axis @m = $2 spatial
  commir.axis @k = $3 managed
  commir.axis @n = $4 spatial
  commir.buffer @A : [@m, @k] f32 in sharding $5
  commir.buffer @B : [@k, @n] f32 in sharding $6
  commir.buffer @C : [@m, @n] f32 out sharding $7
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
EOF
}
# Generated inputs: H100 nodes of 8 GPUs (h100-2x8 with more nodes), and gsN: the GEMM of
# M = K = N, NN = 1 with A and B sharded by rows and C replicated (with --shift-shard, a ring
# of B over N ranks and the output's N x (N - 1) copies in the last stage).
for n in 32 64 128 256 512; do
  sed -e "1,3s/^name = .*/name = \"h100-$((n / 8))x8\"/" -e "0,/^size = 2/s//size = $((n / 8))/" \
    topologies/h100-2x8.toml > "$out/in/h100-$((n / 8))x8.toml"
  gemm "$n" "$n" "$n" 1 "[S(0), R]" "[S(0), R]" "[R, R]" > "$out/in/gs$n.mlir"
done
if (( inputs_only )); then
  echo "sim_compare.sh: inputs in $out/in"
  exit 0
fi

# 1. Example operators x schedules.
for f in examples/*.mlir examples/small/*.mlir examples/2gpu/*.mlir examples/two_tier/*.mlir; do
  base=$(echo "${f#examples/}" | tr / _)
  base=${base%.mlir}
  for s in none shift examples/schedules/*.sched; do
    case $s in
      none) args=() tag=none ;;
      shift) args=(--shift-shard) tag=shift ;;
      *) args=(--schedule "$s") tag=$(basename "$s" .sched) ;;
    esac
    r=$(ranks_of "$f" "${args[@]}")
    if [[ -z $r ]]; then
      "$run" "$f" "${args[@]}" --backend cpu --no-run > "$out/ex.$base.$tag.err.out" 2>&1
      echo "exit $?" >> "$out/ex.$base.$tag.err.out"
      n_cases=$((n_cases + 1))
      continue
    fi
    predict "ex.$base.$tag" "$r" "$f" "${args[@]}"
  done
done

# 2. The suite's cases.
for g in 2 4 8 16; do
  d="$out/in/suite$g"
  bash scripts/suite_cases.sh "$d" "$g" > "$d.cases"
  while IFS=$'\t' read -r id devices _kernels input rest; do
    read -r -a args <<< "$rest"
    predict "suite$g.$id" "$devices" "$input" "${args[@]}"
  done < "$d.cases"
done

# 3. Small GEMMs on [N] meshes.
shards=("[S(0), R]" "[R, S(0)]" "[R, R]")
for n in 4 8 16; do
  for dims in "$n 1 $n" "$n $n 1" "1 $n $n" "$n $n $n"; do
    for a in 0 1 2; do for b in 0 1 2; do for c in 0 1 2; do
      # shellcheck disable=SC2086
      name="gemm$n.$(echo $dims | tr ' ' x).$a$b$c"
      gemm "$n" $dims "${shards[$a]}" "${shards[$b]}" "${shards[$c]}" > "$out/in/$name.mlir"
      if [[ -z $(ranks_of "$out/in/$name.mlir" --shift-shard) ]]; then continue; fi
      predict "$name" "$n" "$out/in/$name.mlir" --shift-shard
    done; done; done
  done
done
for n in 32 64 128; do
  predict "gs$n" "$n" "$out/in/gs$n.mlir" --shift-shard
done

# 4. mercury-tune.
tune_case() {  # NAME FILE TOPOLOGY [ARGS...]
  local name=$1 f=$2 t=$3; shift 3
  local d="$out/tune.$name"
  rm -rf "$d"
  "$tune" "$f" --topology "$t" --out "$d" "$@" > "$d.out" 2>&1
  echo "exit $?" >> "$d.out"
  n_cases=$((n_cases + 1))
}
tune_case attention.2x4 examples/attention.mlir h100-2x4
tune_case attention.2x4.refactor examples/attention.mlir h100-2x4 --refactor-mesh
tune_case attention_2x4.2x4 examples/attention_2x4.mlir h100-2x4
tune_case attention_causal.two_tier examples/attention_causal.mlir topologies/h200-two-tier-2x4-1gpu-measured.toml
tune_case attention_gqa.h200 examples/attention_gqa.mlir h200-1x8 --refactor-mesh
tune_case gemm_rs.2x4 examples/gemm_rs.mlir h100-2x4 --refactor-mesh
tune_case ag_gemm.1x8 examples/ag_gemm.mlir h100-1x8
tune_case mlp.2gpu examples/mlp.mlir topologies/h200-1x2-measured.toml
tune_case mlp70b.2gpu examples/2gpu/mlp_llama3_70b.mlir topologies/h200-1x2-measured.toml
tune_case gqa_2x4.two_tier examples/two_tier/attention_gqa_2x4.mlir topologies/h200-two-tier-2x4-1gpu-measured.toml --refactor-mesh
tune_case attention.4x4 examples/attention.mlir h100-4x4 --refactor-mesh
echo "sim_compare.sh: $n_cases cases in $out"
