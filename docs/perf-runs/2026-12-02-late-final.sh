#!/usr/bin/env bash
# Last device call of the 2026-12-02 late session (one H200): the binaries of the session's end
# (mask rows, shift dependences, output contracts, --check of non-finite values, the cache key,
# the search's bounds) through the compiled schedules at 8 virtual ranks, --alias 2 and
# --alias 8, checked; then the injected device hang on 2 virtual ranks with this binary and with
# the one of ccacf4e (.carry/mercury-run-before, before the executor's carve): does the report
# name the host-side limit with both?
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-late-final.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/final}; mkdir -p "$w/s"
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 300 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "schedules+aliased rc=$?" )
echo "checks ok: $(grep -c '| ok |' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -e '---' -e '| case |' | head
sed 's/shape \[8\]/shape [2]/; s/= 32768/= 8192/g' examples/attention.mlir > "$w/att_2.mlir"
for bin in mercury-run mercury-run-before; do
  s0=$SECONDS
  timeout 60 "$C/$bin" --backend cuda --virtual --check --device-kernels "$C/device_kernels.ptx" \
    "$w/att_2.mlir" --shift-shard --inject-fault hang-rank=1@stage=2 --stage-timeout 5 > "$w/hang-$bin.log" 2>&1
  rc=$?
  echo "hang, $bin: rc=$rc after $((SECONDS - s0)) s: $(grep -m1 'error:' "$w/hang-$bin.log" | cut -c1-220)"
done
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
