#!/usr/bin/env bash
# One H200 (2026-12-03, fourth session): the binaries at the end of the session, and what the
# inputs' distribution costs one kernel:
#   A. the compiled schedules at 8 virtual ranks, --alias 2 and --alias 8 (gpu.sh parts
#      schedules,aliased), all checked;
#   C. mercury-mgpu selfcheck --alias 2;
#   D. torch's cuDNN (CUDNN_LSE) on 2 cases with four input draws, every run with the same
#      history (idle=3000,sustained=6000): f32-rand (sdpa_baseline's default, as
#      mercury-gpu-bench's), f32-unit (uniform [-1, 1): mercury-run's, the suite's "ours"),
#      f32-normal (q at std 2: scripts/baselines/attention.py's), f32-rand again.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03d-verify.sh")
source scripts/device_env.sh
C=.carry
w=/tmp/verify; rm -rf "$w"; mkdir -p "$w/s"  # only the summaries go to $OUT (the tool returns few files)
( OUT=$w/s MERCURY_GPU_PARTS=schedules,aliased timeout 300 bash scripts/gpu.sh --remote > "$w/schedules.txt" 2>&1; echo "A. schedules+aliased rc=$?" )
echo "A. checks ok: $(grep -c '| ok |' "$w/schedules.txt") of $(grep -c -E '\| (ok|FAILED) \|' "$w/schedules.txt")"
grep '^| ' "$w/schedules.txt" | grep -v '| ok |' | grep -v -e '---' -e '| case |' | head
timeout 100 "$C/mercury-mgpu" selfcheck --alias 2 --transport both --device-kernels-ptx "$C/device_kernels.ptx" > "$w/mgpu.txt" 2>&1; echo "C. mgpu selfcheck --alias 2 rc=$?"
grep -iE 'FAIL|passed|rows ok' "$w/mgpu.txt" | tail -3
RE='^b1h32s32k\.(non)?causal$'
for t in rand:f32-rand unit:f32-unit normal:f32-normal rand2:f32-rand; do
  PYTHONUNBUFFERED=1 timeout 150 python3 $C/sdpa_baseline.py --backends '^CUDNN_LSE$' --cases "$RE" \
    --regime idle=3000,sustained=6000 --inputs "${t#*:}" --warmup 2 --reps 7 \
    --out "$w/torch-${t%%:*}.json" > /dev/null 2> "$w/torch-${t%%:*}.log"; echo "D. torch ${t#*:} rc=$?"
done
python3 - "$w" <<'PY' | tee "$w/inputs.txt"
import sys
sys.path.insert(0, "docs/perf-runs")
import p2c_sides
w = sys.argv[1]
t = {k: p2c_sides.torch(f"{w}/torch-{k}.json") for k in ["rand", "unit", "normal", "rand2"]}
print("| case (ms) | f32-rand | f32-unit (mercury-run's) | f32-normal (baselines') | f32-rand again |")
print("| --- | ---: | ---: | ---: | ---: |")
for c in sorted(t["rand"]):
    print(f"| {c} | " + " | ".join(f"{t[k].get(c, float('nan')):.3f}" for k in t) + " |")
PY
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
[[ -n "${OUT:-}" ]] && cp "$w"/schedules.txt "$w"/mgpu.txt "$w"/inputs.txt "$OUT/" || true
