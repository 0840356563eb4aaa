#!/usr/bin/env bash
# The one GPU script: builds here, checks and times on the GPU machine, prints one table.
#
#   bash scripts/gpu.sh            # here (no GPU needed): build and stage everything in .carry/
#   bash scripts/gpu.sh --remote   # on the GPU machine: run every check and benchmark
#   MERCURY_GPU_PARTS=schedules bash scripts/gpu.sh --remote   # only the compiled schedules
#   MERCURY_GPU_CASES='causal|tree' ...                         # only cases matching a regex
#   MERCURY_GPU_PARTS=mgpu bash scripts/gpu.sh --remote         # only the multi-GPU section
#   MERCURY_GPU_PARTS=baselines ...   # PyTorch baselines on every GPU (scripts/baselines, >= 2 GPUs)
#   MERCURY_BENCH_ONLY=P2c,P3 ...     # bench sections; MERCURY_SDPA_CASES=regex: SDPA baseline ids
#   MERCURY_BASELINE_ARGS='--quick' ...  # extra arguments of the baseline scripts
#   MERCURY_BASELINE_SCRIPTS=attention ... # which of scripts/baselines/{attention,gemm}.py
#
# With the device tool, after `bash scripts/gpu.sh` here:
#   run(kind="nvidia-h200", carry=[".carry"], timeout_s=600, command="bash scripts/gpu.sh --remote")
#
# Staged in .carry/ (git-ignored):
#   mercury-run         release, CUDA backend, no MLIR (loads CUDA dynamically; x86-64)
#   mercury-gpu-bench   release: P0 executor self-checks, P1 GEMM, P2 attention, P3 ring
#   device_kernels.ptx  the compiler's device kernels (mercury-opt --emit=ptx, through MLIR)
#   sdpa_baseline.py    torch SDPA (FA2 and cuDNN backends) on the same shapes
#   mercury-mgpu        release: multi-GPU self-checks and link measurements (docs/multi-gpu.md)
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
  cargo build --release -p mercury-bench --bin mercury-gpu-bench
  cargo build --release -p mercury-opt
  cp "$CARGO_TARGET_DIR/release/mercury-run" "$CARGO_TARGET_DIR/release/mercury-gpu-bench" .carry/
  cp scripts/sdpa_baseline.py .carry/
  echo "== device kernels: mercury-opt --emit=ptx --all-device-kernels"
  "$CARGO_TARGET_DIR/release/mercury-opt" --emit=ptx --all-device-kernels --chip=sm_90 examples/attention.mlir > .carry/device_kernels.ptx
  grep -c '\.visible \.entry' .carry/device_kernels.ptx | sed 's/^/   entry points: /'
  # ---- multi-GPU staging (docs/multi-gpu.md) ----
  echo "== building mercury-mgpu (multi-GPU self-checks, link measurements)"
  cargo build --release -p mercury-bench --bin mercury-mgpu
  cp "$CARGO_TARGET_DIR/release/mercury-mgpu" .carry/
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
# cuDNN: the one PyTorch uses (the nvidia-cudnn package in its venv), not the older system copy
# the dynamic loader would find first (kernels/src/cuda/cudnn/loader.rs).
if [[ -z "${MERCURY_CUDNN_LIB:-}" ]]; then
  d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
  [[ -n "$d" && -e "$d/libcudnn.so.9" ]] && export MERCURY_CUDNN_LIB="$d/libcudnn.so.9"
fi
echo "MERCURY_CUDNN_LIB=${MERCURY_CUDNN_LIB:-unset, the dynamic loader search}"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/gpu.sh --remote: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
parts="${MERCURY_GPU_PARTS:-bench,schedules,mgpu,baselines}"

if [[ ",$parts," == *",bench,"* ]]; then
echo "== torch SDPA baseline"
PYTHONUNBUFFERED=1 python3 $C/sdpa_baseline.py ${MERCURY_SDPA_CASES:+--cases "$MERCURY_SDPA_CASES"} \
  --out "$out/sdpa.json" > "$out/sdpa.log" 2>&1 || { echo "sdpa baseline failed"; tail -5 "$out/sdpa.log"; }

echo "== mercury-gpu-bench (${MERCURY_BENCH_ONLY:-P0,P1,P2,P2c,P3}: self-checks, GEMM, attention patches, ring on virtual ranks)"
$C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --sdpa-json "$out/sdpa.json" \
  --only "${MERCURY_BENCH_ONLY:-P0,P1,P2,P2c,P3}" \
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

# ==== multi-GPU section (docs/multi-gpu.md) =================================================
# Only with two or more GPUs: records the topology, measures the links, runs the placed
# executor's self-checks and the ring attention and AG-GEMM schedules with real ranks under
# both transports (peer copies, NCCL), and the launcher path when there is a GPU per rank.
# NCCL_NVLS_ENABLE=0 is exported above and set again inside every NCCL-using program.
if [[ ",$parts," == *",mgpu,"* ]]; then
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( ngpu < 2 )); then
  echo "== multi-GPU section: skipped, only ${ngpu} GPU present (needs >= 2; nothing to measure between GPUs)"
else
  echo "== multi-GPU section: $ngpu GPUs"
  : > "$out/mgpu-table.md"
  nvidia-smi topo -m > "$out/topo.txt" 2>&1 || true
  cat "$out/topo.txt"
  # A libnccl.so for cudarc where the system only has libnccl.so.2.
  if ! (ldconfig -p 2>/dev/null || true) | grep -q 'libnccl\.so '; then
    so=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF}' | head -1 || true)
    [[ -z "$so" ]] && so=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib","libnccl.so.2"))' 2>/dev/null || true)
    if [[ -n "$so" && -e "$so" ]]; then
      mkdir -p /tmp/mercury-nccl && ln -sf "$so" /tmp/mercury-nccl/libnccl.so
      export LD_LIBRARY_PATH="/tmp/mercury-nccl:${LD_LIBRARY_PATH:-}"
    fi
  fi
  $C/mercury-mgpu info 2>&1 | tee "$out/mgpu-info.txt" || status=1
  echo "== mercury-mgpu links (256 MiB peer copies between every pair)"
  $C/mercury-mgpu links --out "$out/topology-measured.toml" > "$out/links.log" 2>&1 || status=1
  grep -E '^#   GPU|^bandwidth_gbs|^latency_us|^hbm_bandwidth' "$out/links.log" || tail -5 "$out/links.log"
  echo "== mercury-mgpu selfcheck (P0 cases on rank r -> GPU r % $ngpu, peer and nccl)"
  if $C/mercury-mgpu selfcheck --transport both --device-kernels-ptx $C/device_kernels.ptx \
      > "$out/mgpu-selfcheck.log" 2>&1; then echo "   all passed"; else status=1; grep -E 'FAILED|ERROR' "$out/mgpu-selfcheck.log" | head -20 || true; fi
  # Real ranks: one rank per GPU. The examples' meshes have 8 ranks; with fewer GPUs, variants
  # with nr = 4 or 2 ranks (the mesh and the schedules' tiling factor set to nr) run with a
  # rank per GPU, and the 8-rank examples run as several ranks per GPU as well.
  if (( ngpu >= 8 )); then nr=8; elif (( ngpu >= 4 )); then nr=4; else nr=2; fi
  gen=$(mktemp -d)
  for f in attention attention_causal ag_gemm; do
    sed "s/shape \[8\]/shape [$nr]/" "examples/$f.mlir" > "$gen/$f.mlir"
  done
  for f in ring_attention asynctp_ag_gemm; do
    sed "s/factor=8/factor=$nr/g" "examples/schedules/$f.sched" > "$gen/$f.sched"
  done
  run_mgpu_case() {
    local name="$1"; shift
    if [[ -n "${MERCURY_GPU_CASES:-}" && ! "$name" =~ $MERCURY_GPU_CASES ]]; then return 0; fi
    echo "== mercury-run (multi-GPU): $name"
    local r="ok"
    $C/mercury-run --backend cuda --check --bench --iters 5 --warmup 2 \
      --device-kernels $C/device_kernels.ptx "$@" > "$out/mgpu-$name.log" 2>&1 || { r="FAILED"; status=1; }
    grep -E "check|schedule|single|gpu:|transport|warning|error" "$out/mgpu-$name.log" | sed 's/^/   /' || true
    local sched single ratio err
    sched=$(grep '^| schedule,' "$out/mgpu-$name.log" | awk -F'|' '{print $3}' | xargs || true)
    single=$(grep '^| single-device' "$out/mgpu-$name.log" | awk -F'|' '{print $3}' | xargs || true)
    ratio=$(grep '^| schedule / single' "$out/mgpu-$name.log" | awk -F'|' '{print $3}' | xargs || true)
    err=$(grep -m1 'check @' "$out/mgpu-$name.log" | sed 's/.*relative error \([^ ]*\).*/\1/' || true)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "${sched:--}" "${single:--}" "${ratio:--}" "${err:--}" "$r" >> "$out/mgpu-table.md"
  }
  for t in peer nccl; do
    run_mgpu_case "ring-mha-${nr}gpu-$t"        "$gen/attention.mlir"        --schedule "$gen/ring_attention.sched"  --devices "$nr" --transport "$t"
    run_mgpu_case "ring-mha-causal-${nr}gpu-$t" "$gen/attention_causal.mlir" --schedule "$gen/ring_attention.sched"  --devices "$nr" --transport "$t"
    run_mgpu_case "asynctp-ag-gemm-${nr}gpu-$t" "$gen/ag_gemm.mlir"          --schedule "$gen/asynctp_ag_gemm.sched" --devices "$nr" --transport "$t"
    if (( nr < 8 )); then
      run_mgpu_case "ring-mha-8ranks-on-${ngpu}gpu-$t" examples/attention.mlir --schedule examples/schedules/ring_attention.sched --virtual --devices "$ngpu" --transport "$t"
    fi
  done
  # One process per GPU through torchrun (--launcher env: NCCL world from the environment,
  # split per group; each process checks the output pieces of its rank).
  if command -v torchrun >/dev/null 2>&1; then
    if [[ -z "${MERCURY_GPU_CASES:-}" || "launcher" =~ $MERCURY_GPU_CASES ]]; then
      echo "== torchrun: $nr processes x 1 GPU, ring attention, --launcher env"
      if NCCL_NVLS_ENABLE=0 MERCURY_NCCL_ID_FILE="$gen/nccl-unique-id" timeout 300 torchrun --standalone --nproc_per_node="$nr" --no-python \
          $C/mercury-run --backend cuda --launcher env --transport nccl --check --seed 7 \
          --device-kernels $C/device_kernels.ptx "$gen/attention.mlir" \
          --schedule "$gen/ring_attention.sched" > "$out/mgpu-launcher.log" 2>&1; then
        echo "   ok"
      else
        status=1; echo "   FAILED"; tail -20 "$out/mgpu-launcher.log"
      fi
      grep -E 'check @|transport' "$out/mgpu-launcher.log" | sed 's/^/   /' || true
    fi
  else
    echo "== torchrun not found: launcher case skipped"
  fi
  echo
  echo "== multi-GPU summary ($ngpu GPUs; times are the whole schedule vs the single-device patch on GPU 0)"
  echo "| case | schedule ms | single-device ms | schedule/single | rel. error vs single | check |"
  echo "| --- | ---: | ---: | ---: | ---: | --- |"
  cat "$out/mgpu-table.md"
  echo
fi
fi
# ==== PyTorch baselines on every GPU (scripts/baselines; issue 13's side-by-side suite) ========
if [[ ",$parts," == *",baselines,"* ]]; then
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( ngpu < 2 )); then
  echo "== baselines: skipped, only ${ngpu} GPU present (they run one process per GPU)"
else
  for script in ${MERCURY_BASELINE_SCRIPTS:-attention gemm}; do
    echo "== torchrun $ngpu x scripts/baselines/$script.py ${MERCURY_BASELINE_ARGS:-}"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout 400 torchrun --standalone --nproc_per_node="$ngpu" scripts/baselines/$script.py \
      ${MERCURY_BASELINE_ARGS:-} --json-out "$out/$script-baselines.json" \
      > "$out/$script-baselines.md" 2> "$out/$script-baselines.log" || { echo "   $script baselines failed"; tail -5 "$out/$script-baselines.log"; }
    cat "$out/$script-baselines.md"
  done
fi
fi
exit $status
