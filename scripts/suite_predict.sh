#!/usr/bin/env bash
# The cost model's prediction for every case of the side-by-side suite (scripts/suite_cases.sh),
# without a GPU: `mercury-run --no-run --predict` on each case's compiled plan, joined with
# measured times by scripts/suite_table.py (predicted, error = predicted / measured - 1, the
# median of the absolute errors). Issue 13, item 2: the measured topology file predicts the suite.
#
#   bash scripts/suite_predict.sh [--topology PRESET|FILE] [--measured TSV] [--gpus N]
#
# --topology: default topologies/h200-1x2-measured.toml (`mercury-mgpu links` on 2 H200s);
# --measured: lines id<TAB>ms<TAB>GPUs[<TAB>note] (`#` lines are comments), the suite's measured
#   medians; default docs/suite-measured.tsv (the calls of docs/perf.md). A measured time is
#   compared only with a case run on as many GPUs as it was measured on.
# --gpus: the GPUs the suite's cases are sized for (default 2; the MLP cases always use 2).
# Exits 1 on bad input or when any case cannot be priced (mercury-run's reason is printed).
# mercury-run from $MERCURY_BIN_DIR, else the newer of target/release and target/debug.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
die() { echo "suite_predict.sh: $*" >&2; exit 1; }
topo=topologies/h200-1x2-measured.toml measured=docs/suite-measured.tsv n=2 given_measured=0
while (( $# )); do
  case $1 in
    --topology|--measured|--gpus)
      (( $# >= 2 )) || die "$1 needs a value"
      case $1 in
        --topology) topo=$2 ;;
        --measured) measured=$2; given_measured=1 ;;
        --gpus) n=$2 ;;
      esac
      shift 2 ;;
    *) die "unknown argument '$1' (--topology, --measured, --gpus)" ;;
  esac
done
[[ $n =~ ^[1-9][0-9]*$ ]] || die "--gpus takes a positive whole number, got '$n'"
# The suite's extents are powers of two (times 7 for the Llama MLP's 28672): a count that is
# not one leaves them indivisible, reported from inside generated files.
(( (n & (n - 1)) == 0 )) || die "--gpus $n: the suite's shapes split only over a power of two of GPUs (2, 4, 8, ...)"
if (( given_measured )) && [[ ! -f $measured ]]; then die "--measured '$measured' is not a file"; fi
bin=${MERCURY_BIN_DIR:-}
if [[ -z $bin ]]; then  # the newer of the two builds
  for d in target/release target/debug; do
    [[ -x $d/mercury-run && ( -z $bin || $d/mercury-run -nt $bin/mercury-run ) ]] && bin=$d
  done
fi
[[ -n $bin && -x $bin/mercury-run ]] || die "no mercury-run (cargo build -p mercury-run, or set MERCURY_BIN_DIR)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/suite_cases.sh "$work" "$n" > "$work/cases.tsv"
# Measured medians: id -> ms and GPUs, validated line by line.
declare -A ms=() gpus=()
if [[ -f $measured ]]; then
  ln=0
  while IFS=$'\t' read -r id t g _ || [[ -n ${id:-} ]]; do
    ln=$((ln + 1))
    id=${id%$'\r'} t=${t%$'\r'} g=${g%$'\r'}
    [[ -z $id || $id == \#* ]] && continue
    [[ $t =~ ^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] && awk -v x="$t" 'BEGIN{exit !(x > 0)}' \
      || die "$measured:$ln: the time of '$id' must be a positive number of milliseconds, got '$t'"
    [[ $g =~ ^[1-9][0-9]*$ ]] || die "$measured:$ln: the GPU count of '$id' must be a positive whole number, got '${g:-nothing}' (lines are id<TAB>ms<TAB>GPUs)"
    [[ -z ${ms[$id]:-} ]] || die "$measured:$ln: '$id' is measured twice"
    ms[$id]=$t gpus[$id]=$g
  done < "$measured"
fi
: > "$work/ours.tsv"
failed=0 other=0
while IFS=$'\t' read -r -a c <&3; do
  id=${c[0]} devs=${c[1]}
  log=$("$bin/mercury-run" --no-run --predict "$topo" "${c[3]}" "${c[@]:4}" 2>&1 < /dev/null) || true
  p=$(grep -m1 '^model: predicted' <<< "$log" | awk '{print $3}' || true)
  if [[ -z $p ]]; then
    echo "suite_predict.sh: $id: no prediction: $(grep -m1 'error\|mercury-run:\|cannot' <<< "$log" || tail -n 1 <<< "$log")" >&2
    failed=$((failed + 1))
    # Anything but a plan the model cannot price (an unusable topology, a case that does not
    # compile) fails every case alike: stop at the first.
    grep -q 'cannot price' <<< "$log" || exit 1
  fi
  t=nan
  if [[ -n ${ms[$id]:-} ]]; then
    if [[ ${gpus[$id]} == "$devs" ]]; then t=${ms[$id]}; else other=$((other + 1)); fi
  fi
  # Measured rows count as checked: the suite records only runs whose checks passed.
  printf '%s\t%s\tok\t%s\t%s\n' "$id" "$t" "${c[*]:4}" "${p:-nan}" >> "$work/ours.tsv"
done 3< "$work/cases.tsv"
echo "cost model on $topo, cases sized for $n GPU(s); measured: $( [[ -f $measured ]] && echo "$measured" || echo none )"
(( other == 0 )) || echo "($other measured time(s) left out: measured on another GPU count than the case runs on)"
python3 scripts/suite_table.py --ours "$work/ours.tsv" | sed "s#$work/##g; s#$root/examples/schedules/##g"
(( failed == 0 )) || die "$failed case(s) could not be priced"
