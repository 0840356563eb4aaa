#!/usr/bin/env bash
# The one GPU script: builds here, checks and times on the GPU machine, prints one table.
#
#   bash scripts/gpu.sh            # here (no GPU needed): build and stage everything in .carry/
#   bash scripts/gpu.sh --remote   # on the GPU machine: run every check and benchmark
#   MERCURY_GPU_PARTS=schedules bash scripts/gpu.sh --remote   # only the compiled schedules
#   MERCURY_GPU_CASES='causal|tree' ...                         # only cases matching a regex
#
# With the device tool, after `bash scripts/gpu.sh` here:
#   run(kind="nvidia-h200", carry=[".carry"], timeout_s=600, command="bash scripts/gpu.sh --remote")
#
# Staged in .carry/ (git-ignored):
#   mercury-run         release, CUDA backend, no MLIR (loads CUDA dynamically; x86-64)
#   mercury-gpu-bench   release: P0 executor self-checks, P1 GEMM, P2 attention, P3 ring
#   device_kernels.ptx  the compiler's device kernels (mercury-opt --emit=ptx, through MLIR)
#   sdpa_baseline.py    torch SDPA (FA2 and cuDNN backends) on the same shapes
# Every check draws fresh random inputs (seeded from the clock) and poisons outputs first.
# Timings are medians of CUDA-event-timed runs after warm-up; no timing is asserted.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if [[ "${1:-}" != "--remote" ]]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  mkdir -p .carry
  echo "== building mercury-run (CUDA backend, no MLIR) and mercury-gpu-bench (release)"
  cargo build --release -p mercury-run --no-default-features --features cuda
  cargo build --release -p mercury-runtime --features cuda --bin mercury-gpu-bench
  cargo build --release -p mercury-opt
  cp "$CARGO_TARGET_DIR/release/mercury-run" "$CARGO_TARGET_DIR/release/mercury-gpu-bench" .carry/
  cp scripts/sdpa_baseline.py .carry/
  echo "== device kernels: mercury-opt --emit=ptx --all-device-kernels"
  "$CARGO_TARGET_DIR/release/mercury-opt" --emit=ptx --all-device-kernels --chip=sm_90 examples/attention.mlir > .carry/device_kernels.ptx
  grep -c '\.visible \.entry' .carry/device_kernels.ptx | sed 's/^/   entry points: /'
  du -sh .carry
  exit 0
fi

# ---- on the GPU machine --------------------------------------------------------------------
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
out="${OUT:-/tmp/mercury-gpu-out}"
mkdir -p "$out"
C=.carry
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/gpu.sh --remote: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
parts="${MERCURY_GPU_PARTS:-bench,schedules}"

if [[ ",$parts," == *",bench,"* ]]; then
echo "== torch SDPA baseline"
PYTHONUNBUFFERED=1 python3 $C/sdpa_baseline.py --out "$out/sdpa.json" > "$out/sdpa.log" 2>&1 || { echo "sdpa baseline failed"; tail -5 "$out/sdpa.log"; }

echo "== mercury-gpu-bench (P0 self-checks, P1 GEMM, P2 attention, P3 ring on virtual ranks)"
$C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --sdpa-json "$out/sdpa.json" \
  --json-out "$out/bench.json" > "$out/bench.log" 2>&1 || status=1
tail -60 "$out/bench.log" || true
fi

# Compiled schedules: CommIR -> passes -> per-rank plan -> CUDA executor, 8 virtual ranks on one
# GPU, checked against the single-device patch and timed side by side.
run_case() {
  local name="$1"; shift
  # MERCURY_GPU_CASES: a regular expression selecting cases by name (default: all).
  if [[ -n "${MERCURY_GPU_CASES:-}" && ! "$name" =~ $MERCURY_GPU_CASES ]]; then return 0; fi
  echo "== mercury-run: $name"
  if $C/mercury-run --backend cuda --virtual --check --bench --iters 5 --warmup 2 \
      --device-kernels $C/device_kernels.ptx "$@" > "$out/run-$name.log" 2>&1; then
    r="ok"
  else
    r="FAILED"; status=1
  fi
  grep -E "check|schedule|single|gpu:|error" "$out/run-$name.log" | sed 's/^/   /' || true
  local sched single ratio
  sched=$(grep '^| schedule,' "$out/run-$name.log" | awk -F'|' '{print $3}' | xargs || true)
  single=$(grep '^| single-device' "$out/run-$name.log" | awk -F'|' '{print $3}' | xargs || true)
  ratio=$(grep '^| schedule / single' "$out/run-$name.log" | awk -F'|' '{print $3}' | xargs || true)
  err=$(grep -m1 'check @' "$out/run-$name.log" | sed 's/.*relative error \([^ ]*\).*/\1/' || true)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "${sched:--}" "${single:--}" "${ratio:--}" "${err:--}" "$r" >> "$out/table.md"
}
: > "$out/table.md"
if [[ ",$parts," == *",schedules,"* ]]; then
sed 's/causal = false/causal = true/' examples/attention_gqa.mlir > "$out/attention_gqa_causal.mlir"
sed 's/causal = false/causal = true/' examples/attention_b16.mlir > "$out/attention_b16_causal.mlir"
run_case ring-mha          examples/attention.mlir        --schedule examples/schedules/ring_attention.sched
run_case ring-mha-causal   examples/attention_causal.mlir --schedule examples/schedules/ring_attention.sched
run_case ring-gqa          examples/attention_gqa.mlir    --shift-shard
run_case ring-gqa-causal   "$out/attention_gqa_causal.mlir" --shift-shard
run_case ring-b16          examples/attention_b16.mlir    --schedule examples/schedules/ring_attention.sched
run_case ring-b16-causal   "$out/attention_b16_causal.mlir" --schedule examples/schedules/ring_attention.sched
run_case loongtrain-2x4    examples/attention_2x4.mlir    --schedule examples/schedules/loongtrain.sched
run_case usp-2x4           examples/attention_2x4.mlir    --schedule examples/schedules/usp.sched
run_case ulysses           examples/attention.mlir        --schedule examples/schedules/ulysses.sched
run_case tree-attention    examples/attention.mlir        --schedule examples/schedules/tree_attention.sched
run_case context-parallel  examples/attention.mlir        --schedule examples/schedules/context_parallel.sched
run_case asynctp-ag-gemm   examples/ag_gemm.mlir          --schedule examples/schedules/asynctp_ag_gemm.sched
run_case shift-reduce-rs   examples/gemm_rs.mlir          --schedule examples/schedules/shift_reduce.sched
run_case megatron-rs       examples/gemm_rs.mlir          --schedule examples/schedules/megatron_rs.sched
fi

echo
echo "== summary (8 virtual ranks on one GPU; times are the whole schedule vs the single-device patch)"
echo "| case | schedule ms | single-device ms | schedule/single | rel. error vs single | check |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
cat "$out/table.md"
echo
exit $status
