#!/usr/bin/env bash
# One H200 (2026-12-03, fifth session): the distributed baselines draw mercury-run's inputs.
# scripts/baselines/*.py now take --inputs unit (the default: uniform in [-1, 1) in f32, rounded
# to bf16, every input, as runtime/src/cpu.rs random_inputs) or normal (the earlier draws:
# N(0, 1), q x 2, weights / sqrt(K)). This call checks the change and times what it moves:
#   A. --smoke (CPU + gloo, 2 processes, in the background while B runs) of attention.py,
#      gemm.py and mlp.py under both --inputs: exit status and checked rows;
#   B. one GPU, world 1 (torchrun --nproc_per_node=1): the attention baselines' cudnn_1gpu on
#      the 32K quick cases and the GEMM baselines' nccl_cublas on the 8192^3 cases, in the
#      order unit, normal, unit, normal (clock history alike for both draws), every row checked.
# run(kind="nvidia-h200", command="bash docs/perf-runs/2026-12-03e-baseline-inputs.sh")
source scripts/device_env.sh
w=/tmp/binputs; rm -rf "$w"; mkdir -p "$w"
(
  for s in attention gemm mlp; do
    for i in unit normal; do
      PYTHONUNBUFFERED=1 timeout 240 torchrun --standalone --nproc_per_node=2 \
        scripts/baselines/$s.py --smoke --inputs $i --json-out "$w/smoke-$s-$i.json" \
        > "$w/smoke-$s-$i.md" 2> "$w/smoke-$s-$i.log"
      echo "$s $i rc=$?"
    done
  done > "$w/smoke.rc"
) &
smoke=$!
round=0
for i in unit normal unit normal; do
  round=$((round + 1))
  PYTHONUNBUFFERED=1 timeout 200 torchrun --standalone --nproc_per_node=1 scripts/baselines/attention.py \
    --cases '^attn\.(mha|gqa)\.b1\.s32k\.(non)?causal$' --baselines '^cudnn_1gpu$' --inputs $i \
    --target-ms 1500 --json-out "$w/att-$round-$i.json" > /dev/null 2> "$w/att-$round-$i.log"
  echo "B. attention round $round ($i) rc=$?"
  PYTHONUNBUFFERED=1 timeout 150 torchrun --standalone --nproc_per_node=1 scripts/baselines/gemm.py \
    --cases '^gemm\.(ag|rs)\.m8192\.n8192\.k8192$' --baselines '^nccl_cublas$' --inputs $i \
    --target-ms 1500 --json-out "$w/gemm-$round-$i.json" > /dev/null 2> "$w/gemm-$round-$i.log"
  echo "B. gemm round $round ($i) rc=$?"
done
wait $smoke
echo "A. smoke (CPU + gloo, 2 processes):"; sed 's/^/   /' "$w/smoke.rc"
python3 - "$w" <<'PY' | tee "$w/table.md"
import glob, json, os, sys
w = sys.argv[1]
def rows(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        return None, str(e)
    return d, [r for r in d.get("results", [])]
print("\nA. smoke rows (check: counts)")
for p in sorted(glob.glob(f"{w}/smoke-*.json")):
    d, rs = rows(p)
    if d is None:
        print(f"   {os.path.basename(p)}: {rs}"); continue
    checks = {}
    for r in rs:
        checks[r.get("check")] = checks.get(r.get("check"), 0) + 1
    print(f"   {os.path.basename(p)}: inputs {d.get('inputs')}, {checks}")
print("\nB. one H200, world 1, ms (check)")
t = {}
for p in sorted(glob.glob(f"{w}/att-*.json") + glob.glob(f"{w}/gemm-*.json")):
    kind, rnd, inp = os.path.basename(p)[:-5].split("-")
    d, rs = rows(p)
    if d is None:
        print(f"   {p}: {rs}"); continue
    for r in rs:
        t.setdefault(r["id"], {})[f"{inp}{rnd}"] = (r.get("ms"), r.get("check"))
cols = ["unit1", "normal2", "unit3", "normal4"]
print("| case | baseline | " + " | ".join(cols) + " | normal / unit |")
print("| --- | --- |" + " ---: |" * (len(cols) + 1))
for cid in sorted(t):
    v = t[cid]
    ms = {c: v[c][0] for c in cols if c in v and v[c][0]}
    cells = [f"{v[c][0]:.3f} ({v[c][1]})" if c in v and v[c][0] else f"- ({v.get(c, (0, 'missing'))[1]})" for c in cols]
    u = [ms[c] for c in ("unit1", "unit3") if c in ms]
    n = [ms[c] for c in ("normal2", "normal4") if c in ms]
    ratio = f"{(sum(n) / len(n)) / (sum(u) / len(u)):.3f}" if u and n else "-"
    print(f"| {cid} | {'cudnn_1gpu' if cid.startswith('attn') else 'nccl_cublas'} | " + " | ".join(cells) + f" | {ratio} |")
PY
for f in "$w"/*.log; do grep -l -iE 'Traceback|error' "$f" > /dev/null && { echo "--- $f"; grep -iE -m5 'Traceback|error' "$f"; tail -3 "$f"; }; done 2>/dev/null | head -60
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes left on the GPU: /'
[[ -n "${OUT:-}" ]] && tar czf "$OUT/binputs.tgz" -C /tmp binputs && cp "$w/table.md" "$OUT/" || true
