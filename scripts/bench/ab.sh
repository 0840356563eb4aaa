#!/usr/bin/env bash
# A/B of two mercury-run binaries (a change against the binary before it), alternated in one
# call so that both meet the same clocks, every run checked against the single-device patch.
#
#   bash scripts/gpu.sh                       # here: stage .carry/ (mercury-run is "after")
#   cp OLD_BUILD/mercury-run .carry/mercury-run-before
#   cp my_cases.txt .carry/                   # the cases, one a line (below)
#   run(kind="nvidia-h200", carry=[".carry"], command="bash scripts/bench/ab.sh .carry/my_cases.txt")
#
# A case line: NAME PTX ARGS..., PTX a file of .carry/ (device_kernels.ptx, mlp_kernels.ptx) and
# ARGS mercury-run's operator and schedule (`examples/gemm_rs.mlir --schedule
# examples/schedules/megatron_rs.sched`, `examples/attention.mlir --shift-shard`); `#` starts a
# comment. Environment: PLACE (virtual, the default; alias=K: rank r on device id r % K; 2proc:
# two processes of one rank each over NCCL's loopback socket, both checked), WHO (default
# "before after": .carry/mercury-run-before, .carry/mercury-run), REPS (3), ITERS (20),
# WARMUP (5). Prints one TSV line per run: the schedule's and the single-device medians (ms).
set -uo pipefail
cases=${1:?usage: ab.sh CASES_FILE   (bash scripts/bench/ab.sh --help: the usage)}
if [[ $cases == -h || $cases == --help ]]; then
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0
fi
[[ -r $cases ]] || { echo "ab.sh: error: cannot read the cases file '$cases'" >&2; exit 1; }
cases=$(realpath "$cases")
cd "$(dirname "$0")/../.."
source scripts/device_env.sh
w=${OUT:-/tmp/bench-ab}; mkdir -p "$w"
place=${PLACE:-virtual}
case $place in
  virtual) where=(--virtual) ;;
  alias=[0-9]*) where=(--alias "${place#alias=}") ;;
  2proc) where=(--launcher env --transport nccl) ;;
  *) echo "ab.sh: error: PLACE '$place' is none of virtual, alias=K, 2proc" >&2; exit 1 ;;
esac
bin() { [[ $1 == after ]] && echo .carry/mercury-run || echo ".carry/mercury-run-$1"; }
for who in ${WHO:-before after}; do
  [[ -x $(bin "$who") ]] || { echo "ab.sh: error: $(bin "$who") is not an executable" >&2; exit 1; }
done
status=0
printf 'rep\tcase\twho\tplace\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in $(seq "${REPS:-3}"); do
  while read -r name ptx args; do
    [[ -z $name || $name == \#* ]] && continue
    for who in ${WHO:-before after}; do
      cmd=("$(bin "$who")" --backend cuda "${where[@]}" --check --bench --iters "${ITERS:-20}"
        --warmup "${WARMUP:-5}" --device-kernels ".carry/$ptx")
      # shellcheck disable=SC2206 # ARGS are mercury-run's words, split as written
      cmd+=($args)
      log="$w/$name.$who.$rep"
      if [[ $place == 2proc ]]; then
        nccl_pair "$w" "$name.$who.$rep" 300 "${cmd[@]}"; rc=${pair_rc// /,}
        log="$log-r0.log"
      else
        timeout 300 "${cmd[@]}" > "$log.log" 2>&1; rc=$?
        log="$log.log"
      fi
      [[ $rc == 0 || $rc == 0,0 ]] || status=1
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$name" "$who" "$place" \
        "$(grep -m1 '^| schedule,' "$log" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep -m1 '^| single-device' "$log" | awk -F'|' '{print $3}' | xargs)" "$rc" \
        "$(grep -m1 'check @. ' "$log" | grep -o 'relative error [^ ]*')"
    done
  done < "$cases"
done
exit $status
