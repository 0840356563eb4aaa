#!/usr/bin/env bash
# Run 2026-12-03 (fourth session; output in 2026-12-03c-inputs.txt): does the P2c gap against torch follow
# the inputs' bits? torch with its old default inputs (torch.rand in bf16: 256 levels) and with
# f32 draws rounded to bf16 (every mantissa bit random, as our bench's fill), ours between,
# every case with the same history (--regime idle=3000,sustained=6000). If torch with
# --inputs f32-rand times as ours does, the gap is the data's power, not the patch.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-03c-inputs.sh")
source scripts/device_env.sh
C=.carry
w=${OUT:-/tmp/inputs}; mkdir -p "$w"
G=idle=3000,sustained=6000
CASES=b1h32s32k.noncausal,b1h32s32k.causal
RE='^b1h32s32k\.(non)?causal$'
torch() { # tag inputs
  PYTHONUNBUFFERED=1 timeout 150 python3 $C/sdpa_baseline.py --backends '^CUDNN_LSE$' --cases "$RE" \
    --regime "$G" --inputs "$2" --warmup 2 --reps 7 --out "$w/torch-$1.json" > /dev/null 2> "$w/torch-$1.log"; echo "torch $1 rc=$?"
}
ours() {
  timeout 150 $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --only P2c \
    --p2c-cases "$CASES" --regime "$G" --warmup 2 --reps 7 \
    --json-out "$w/ours-$1.json" > "$w/ours-$1.txt" 2>&1; echo "ours $1 rc=$?"
}
torch grid bf16-rand; torch full f32-rand; ours 1; torch full2 f32-rand; torch grid2 bf16-rand
grep -h FAIL "$w"/ours-*.txt | head -3
python3 - "$w" <<'PY'
import sys
sys.path.insert(0, "docs/perf-runs")
import p2c_sides
w = sys.argv[1]
o = p2c_sides.ours(f"{w}/ours-1.json")
t = {k: p2c_sides.torch(f"{w}/torch-{k}.json") for k in ["grid", "full", "full2", "grid2"]}
print("| case | torch, 256-level inputs | torch, full-mantissa inputs | ours (full-mantissa) |")
print("| --- | ---: | ---: | ---: |")
for c in o:
    g = (t["grid"][c] + t["grid2"][c]) / 2
    f = (t["full"][c] + t["full2"][c]) / 2
    print(f"| {c} | {g:.3f} | {f:.3f} | {o[c]:.3f} |")
PY
