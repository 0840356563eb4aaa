#!/usr/bin/env bash
# The cost model's prediction for every case of the side-by-side suite (scripts/suite_cases.sh),
# without a GPU: `mercury-run --predict` on each case's compiled plan, joined with measured
# times by scripts/suite_table.py (predicted, error = predicted / measured - 1, the median of
# the absolute errors). Issue 13, item 2: the measured topology file predicts the suite.
#
#   bash scripts/suite_predict.sh [--topology FILE] [--measured TSV] [--gpus N]
#
# --topology: default topologies/h200-1x2-measured.toml (`mercury-mgpu links` on 2 H200s);
# --measured: lines id<TAB>ms (the suite's measured medians; `#` lines are comments), default
#   docs/suite-measured.tsv (the calls of docs/perf.md); without it only predictions print.
# mercury-run from $MERCURY_BIN_DIR, else the newer of target/release and target/debug.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
topo=topologies/h200-1x2-measured.toml measured=docs/suite-measured.tsv n=2
while (( $# )); do
  case $1 in
    --topology) topo=${2:?--topology FILE}; shift 2 ;;
    --measured) measured=${2:?--measured TSV}; shift 2 ;;
    --gpus) n=${2:?--gpus N}; shift 2 ;;
    *) echo "suite_predict.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
bin=${MERCURY_BIN_DIR:-}
if [[ -z $bin ]]; then  # the newer of the two builds
  for d in target/release target/debug; do
    [[ -x $d/mercury-run && ( -z $bin || $d/mercury-run -nt $bin/mercury-run ) ]] && bin=$d
  done
fi
[[ -n $bin && -x $bin/mercury-run ]] || { echo "suite_predict.sh: no mercury-run (cargo build -p mercury-run, or set MERCURY_BIN_DIR)" >&2; exit 1; }
[[ -f $topo ]] || { echo "suite_predict.sh: no topology file '$topo'" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/suite_cases.sh "$work" "$n" > "$work/cases.tsv"
declare -A ms=()
if [[ -f $measured ]]; then
  while IFS=$'\t' read -r id t _; do
    [[ -z $id || $id == \#* ]] && continue
    ms[$id]=$t
  done < "$measured"
fi
: > "$work/ours.tsv"
while IFS=$'\t' read -r -a c <&3; do
  log=$("$bin/mercury-run" --no-run --predict "$topo" "${c[3]}" "${c[@]:4}" 2>&1 < /dev/null || true)
  p=$(grep -m1 '^model: predicted' <<< "$log" | awk '{print $3}' || true)
  [[ -n $p ]] || { echo "suite_predict.sh: ${c[0]}: no prediction:" >&2; grep -m3 'error' <<< "$log" >&2 || true; }
  # Measured rows count as checked: the suite records only runs whose checks passed.
  printf '%s\t%s\tok\t%s\t%s\n' "${c[0]}" "${ms[${c[0]}]:-nan}" "${c[*]:4}" "${p:-nan}" >> "$work/ours.tsv"
done 3< "$work/cases.tsv"
echo "cost model on $topo; measured: $( [[ -f $measured ]] && echo "$measured" || echo none )"
python3 scripts/suite_table.py --ours "$work/ours.tsv" | sed "s#$work/##g; s#$root/examples/schedules/##g"
