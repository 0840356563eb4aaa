#!/usr/bin/env bash
# The one GPU script: builds here, checks and times on the GPU machine, prints one table.
#
#   bash scripts/gpu.sh            # here (no GPU needed): build and stage everything in .carry/
#   bash scripts/gpu.sh --remote   # on the GPU machine: run every check and benchmark
#   bash scripts/gpu.sh --help     # this text (any other argument is an error: nothing is built)
#   MERCURY_GPU_PARTS=schedules bash scripts/gpu.sh --remote   # only the compiled schedules
#   MERCURY_GPU_CASES='causal|tree' ...                         # only cases matching a regex
#                                     # (the odd shapes of examples/shapes/cases.txt among them)
#   MERCURY_GPU_PARTS=aliased ...     # the same schedules on 2 and 8 device ids aliasing GPU 0
#                                     # (mercury-run --alias K): the multi-GPU peer-copy and
#                                     # spanning-group paths, checked, on one GPU (not default;
#                                     # MERCURY_GPU_ALIAS='2' for the 2 device ids only)
#   MERCURY_GPU_PARTS=mgpu bash scripts/gpu.sh --remote         # only the multi-GPU section
#   MERCURY_GPU_PARTS=masks ...       # masked attention (issue 43, not default): cuDNN's
#                                     # variable-sequence graphs probed (ragged_probe: each variant
#                                     # finalised and checked against f64); packed documents,
#                                     # windows, cross lower_right under the rings (also --alias 2),
#                                     # checked; then our single-device packed attention (routes
#                                     # cudnn and nvrtc) vs flex_attention on long-tail documents
#                                     # (scripts/bench/packed_vs_flex.py)
#   MERCURY_GPU_PARTS=baselines ...   # PyTorch baselines on every GPU (scripts/baselines, >= 2 GPUs)
#   MERCURY_BENCH_ONLY=P2c,P3 ...     # bench sections; MERCURY_SDPA_CASES=regex: SDPA baseline ids
#   MERCURY_REGIME=idle=3000,sustained=6000   # both sides of the bench part timed alike (each
#                                     # timed row then costs the regime's seconds); without it
#                                     # the ratios against torch are marked "timed unalike"
#                                     # (torch draws inputs as ours: sdpa_baseline.py --inputs)
#   MERCURY_BASELINE_ARGS='--quick' ...  # extra arguments of the baseline scripts
#   MERCURY_BASELINE_SCRIPTS=attention ... # which of scripts/baselines/{attention,gemm,mlp}.py
#   MERCURY_GPU_PARTS=suite,baselines MERCURY_SUITE_CASES='^mlp' MERCURY_BASELINE_SCRIPTS=mlp ...
#                                          # only the MLP rows (issue 14: Llama-3 8B / 70B, TP = 2)
#   MERCURY_GPU_PARTS=faults bash scripts/gpu.sh --remote       # fault handling (not default): 2 GPUs,
#                                     # or 2 processes sharing 1 GPU over NCCL sockets
#   MERCURY_GPU_PARTS=rates bash scripts/gpu.sh --remote        # the patches' rate tables (one GPU)
#   MERCURY_GPU_PARTS=backward bash scripts/gpu.sh --remote     # the attention backward (issue 38):
#                                     # the cuDNN backward patch checked (f64 rows) and timed
#                                     # beside torch's cuDNN backward (scripts/sdpa_bwd_baseline.py)
#                                     # in one regime (MERCURY_REGIME, default sustained=1500)
#   MERCURY_GPU_PARTS=suite,baselines ...  # issue 13's side-by-side suite: ours on every GPU, the
#                                          # PyTorch baselines, one joined table (>= 2 GPUs);
#                                          # MERCURY_SUITE_SEQS, _CASES, _ITERS (5), _WARMUP (2)
#   MERCURY_GPU_PARTS=twotier ...         # two processes as two "nodes" of 4 virtual ranks, NCCL
#                                          # socket between them: measured tiers, predicted vs
#                                          # measured rankings of the templates and the pick,
#                                          # then every candidate profiled in both processes
#                                          # (the model's best MERCURY_TWOTIER_PROFILE_TOP, default 6)
#   MERCURY_GPU_PARTS=torch bash scripts/gpu.sh --remote  # the mercury Python package on CUDA
#                                          # tensors (issue 37): world size 1 and op(**inputs) on
#                                          # virtual ranks against torch; 2 processes sharing GPU 0
#                                          # over NCCL sockets; mercury.attention vs torch's cuDNN
#                                          # SDPA on the P2c shapes (scripts/torch_gpu.py); the
#                                          # Llama example at world size 1 and as that pair;
#                                          # MERCURY_GPU_TORCH=world1,pair,llama,bench: which steps
#                                          # (and host: where a call's host time goes, layer by layer)
#   MERCURY_GPU_PARTS=tune bash scripts/gpu.sh --remote  # profile-guided search (not default):
#                                          # mercury-tune --profile-top 4, one line per case
#
# With the device tool, after `bash scripts/gpu.sh` here:
#   run(kind="nvidia-h200", carry=[".carry"], timeout_s=600, command="bash scripts/gpu.sh --remote")
#
# Staged in .carry/ (git-ignored):
#   mercury-run         release, CUDA backend, no MLIR (loads CUDA dynamically; x86-64)
#   mercury-gpu-bench   release: P0 executor self-checks, P1 GEMM, P2 attention, P3 ring
#   device_kernels.ptx  the compiler's device kernels (mercury-opt --emit=ptx, through MLIR)
#   mlp_kernels.ptx     the same plus the generated tile kernels of the MLP examples (GeLU + cast
#                       epilogue), mercury-opt --emit=ptx on examples/mlp.mlir
#   sdpa_baseline.py    torch SDPA (FA2 and cuDNN backends) on the same shapes
#   sdpa_bwd_baseline.py torch's cuDNN SDPA backward alone on the same shapes (P2b's ratios)
#   mercury-mgpu        release: multi-GPU self-checks and link measurements (docs/multi-gpu.md)
#   mercury-tune        release, CUDA backend, no MLIR: the search with --profile-top (part tune)
#   mercury_rs-*.whl    the mercury Python package (abi3, release; part torch) and torch_gpu.py
# Every check draws fresh random inputs (seeded from the clock) and poisons outputs first.
# Timings are medians of CUDA-event-timed runs after warm-up; no timing is asserted.
set -euo pipefail
# The arguments before anything else: a mistyped one (`--remtoe`, `--help`) must not start the
# release builds of the first form.
remote=0
for arg in "$@"; do
  case $arg in
    -h | --help)
      # The usage: the comment above, without its '#'.
      awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
      exit 0 ;;
    --remote)
      if (( remote )); then echo "gpu.sh: error: '--remote' given twice" >&2; exit 1; fi
      remote=1 ;;
    *)
      echo "gpu.sh: error: unknown argument '$arg' (no argument: build and stage here; --remote: run on the GPU machine; --help: the usage)" >&2
      exit 1 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if [[ "${1:-}" != "--remote" ]]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  mkdir -p .carry
  echo "== building mercury-run, mercury-tune (CUDA backend, no MLIR), mercury-bench and the Python package's crate (release)"
  # One invocation: features are resolved once for all of them, the same as the wheel's build
  # below (maturin, -p mercury-python) resolves them (cargo tree: identical for every crate of
  # the wheel's graph), so that build finds every crate built. Built in separate invocations,
  # the wheel's pyo3 turns on syn features the binaries' graphs lack, and every proc macro and
  # all that uses one would be built a second time.
  cargo build --release -p mercury-run -p mercury-tune -p mercury-bench -p mercury-python \
    --no-default-features --features mercury-run/cuda,mercury-tune/cuda,mercury-python/default
  cargo build --release -p mercury-opt
  cp "$CARGO_TARGET_DIR/release/mercury-run" "$CARGO_TARGET_DIR/release/mercury-gpu-bench" .carry/
  # The masks part's probe of cuDNN's variable-sequence graphs (kernels/examples/ragged_probe.rs).
  cargo build --release -p mercury-kernels --features cuda --example ragged_probe
  cp "$CARGO_TARGET_DIR/release/examples/ragged_probe" .carry/
  cp scripts/sdpa_baseline.py scripts/sdpa_bwd_baseline.py .carry/
  echo "== device kernels: mercury-opt --emit=ptx --all-device-kernels"
  "$CARGO_TARGET_DIR/release/mercury-opt" --emit=ptx --all-device-kernels --chip=sm_90 examples/attention.mlir > .carry/device_kernels.ptx
  grep -c '\.visible \.entry' .carry/device_kernels.ptx | sed 's/^/   entry points: /'
  # The MLP's generated kernels (one per distinct elementwise program; the names hash what it
  # computes, so every MLP example and mercury-run's single-device reference use the same
  # ones). Under the schedules GeLU is the gemm patch's cuBLASLt epilogue; the unscheduled
  # operator (the reference: a tile matmul, then the generated GeLU + cast) still needs its
  # kernel. Every plan the MLP cases run must find its kernels in this file.
  echo "== generated tile kernels of the MLP examples: mercury-opt --emit=ptx"
  "$CARGO_TARGET_DIR/release/mercury-opt" --emit=ptx --all-device-kernels --chip=sm_90 \
    examples/mlp.mlir > .carry/mlp_kernels.ptx
  for ex in examples/mlp.mlir examples/2gpu/mlp_llama3_8b.mlir examples/2gpu/mlp_llama3_70b.mlir; do
    for sc in "" --schedule=examples/schedules/mlp_overlap.sched --schedule=examples/schedules/mlp_megatron.sched --schedule=examples/schedules/mlp_ag_rs.sched; do
      for k in $("$CARGO_TARGET_DIR/release/mercury-opt" --emit=gpu-mlir $sc "$ex" | grep -o 'gpu.func @mercury_\(ew\|row\)_[a-z0-9_]*' | sed 's/gpu.func @//'); do
        grep -q "\.entry $k(" .carry/mlp_kernels.ptx || { echo "staging: $ex $sc needs $k, not in mlp_kernels.ptx" >&2; exit 1; }
      done
    done
  done
  grep -o '\.entry mercury_\(ew\|row\)_[a-z0-9_]*' .carry/mlp_kernels.ptx | sed 's/^/   generated: /'
  # ---- multi-GPU staging (docs/multi-gpu.md) ----
  echo "== mercury-mgpu (multi-GPU self-checks, link measurements), mercury-tune (built above)"
  cp "$CARGO_TARGET_DIR/release/mercury-mgpu" "$CARGO_TARGET_DIR/release/mercury-tune" .carry/
  echo "== the mercury Python package (abi3 wheel, release) and scripts/torch_gpu.py"
  rm -f .carry/mercury_rs-*.whl
  python3 -m pip wheel -q --no-deps -w .carry ./python
  cp scripts/torch_gpu.py .carry/
  du -sh .carry
  exit 0
fi

# ---- on the GPU machine --------------------------------------------------------------------
# NVLink multicast off, CUDA's libraries, MERCURY_CUDNN_LIB (PyTorch's cuDNN): see the file.
source scripts/device_env.sh
out="${OUT:-/tmp/mercury-gpu-out}"
mkdir -p "$out"
C=.carry
echo "MERCURY_CUDNN_LIB=${MERCURY_CUDNN_LIB:-unset, the dynamic loader search}"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/gpu.sh --remote: no GPU found (nvidia-smi -L failed); nothing to run" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
parts="${MERCURY_GPU_PARTS:-bench,backward,schedules,mgpu,baselines,torch}"

if [[ ",$parts," == *",bench,"* ]]; then
echo "== torch SDPA baseline"
PYTHONUNBUFFERED=1 python3 $C/sdpa_baseline.py ${MERCURY_SDPA_CASES:+--cases "$MERCURY_SDPA_CASES"} \
  ${MERCURY_REGIME:+--regime "$MERCURY_REGIME"} \
  --out "$out/sdpa.json" > "$out/sdpa.log" 2>&1 || { echo "sdpa baseline failed"; tail -5 "$out/sdpa.log"; }

echo "== mercury-gpu-bench (${MERCURY_BENCH_ONLY:-P0,P1,P2,P2c,P3}: self-checks, GEMM, attention patches, ring on virtual ranks)"
$C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --sdpa-json "$out/sdpa.json" \
  ${MERCURY_REGIME:+--regime "$MERCURY_REGIME"} \
  --only "${MERCURY_BENCH_ONLY:-P0,P1,P2,P2c,P3}" \
  --json-out "$out/bench.json" > "$out/bench.log" 2>&1 || status=1
tail -60 "$out/bench.log" || true
fi

# Compiled schedules: CommIR -> passes -> per-rank plan -> CUDA executor, 8 virtual ranks on one
# GPU, checked against the single-device patch and timed side by side. PLACE (default
# --virtual) says where the ranks go; the aliased part sets it to `--alias K` (K device ids on
# GPU 0, peer-copy paths between them: the multi-GPU copy code on one GPU).
run_case() {
  local name="$1"; shift
  # MERCURY_GPU_CASES: a regular expression selecting cases by name (default: all).
  if [[ -n "${MERCURY_GPU_CASES:-}" && ! "$name" =~ $MERCURY_GPU_CASES ]]; then return 0; fi
  local tag="${TAG:-}" log
  log="$out/run-$name${tag:+-$tag}.log"
  echo "== mercury-run: $name${tag:+ ($PLACE)}"
  # shellcheck disable=SC2086 # PLACE is a list of flags
  if $C/mercury-run --backend cuda ${PLACE:---virtual} --check --bench --iters 5 --warmup 2 \
      --device-kernels "${PTX:-$C/device_kernels.ptx}" "$@" > "$log" 2>&1; then
    r="ok"
  else
    r="FAILED"; status=1
  fi
  grep -E "check|schedule|single|gpu:|error" "$log" | sed 's/^/   /' || true
  local sched single ratio
  sched=$(grep '^| schedule,' "$log" | awk -F'|' '{print $3}' | xargs || true)
  single=$(grep '^| single-device' "$log" | awk -F'|' '{print $3}' | xargs || true)
  ratio=$(grep '^| schedule / single' "$log" | awk -F'|' '{print $3}' | xargs || true)
  err=$(grep -m1 'check @' "$log" | sed 's/.*relative error \([^ ]*\).*/\1/' || true)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name${tag:+ ($tag)}" "${sched:--}" "${single:--}" "${ratio:--}" "${err:--}" "$r" >> "$out/table.md"
}
schedule_cases() {
sed 's/causal = false/causal = true/' examples/attention_gqa.mlir > "$out/attention_gqa_causal.mlir"
sed 's/causal = false/causal = true/' examples/attention_b16.mlir > "$out/attention_b16_causal.mlir"
run_case ring-mha          examples/attention.mlir        --schedule examples/schedules/ring_attention.sched
run_case ring-mha-causal   examples/attention_causal.mlir --schedule examples/schedules/ring_attention.sched
# Load-balanced causal rings (issue 12): declared zigzag (torch CP's contract, nothing permuted),
# contiguous permuted to zigzag and back inside the timed stages, and striped (blocks of 128).
run_case zigzag-mha-causal examples/attention_causal_zigzag.mlir --shift-shard
run_case zigzag-mha-causal-permuted examples/attention_causal.mlir --schedule examples/schedules/zigzag_ring.sched
run_case striped-mha-causal examples/attention_causal.mlir --schedule examples/schedules/striped_ring.sched
run_case ring-gqa          examples/attention_gqa.mlir    --shift-shard
run_case ring-gqa-causal   "$out/attention_gqa_causal.mlir" --shift-shard
run_case ring-b16          examples/attention_b16.mlir    --schedule examples/schedules/ring_attention.sched
run_case ring-b16-causal   "$out/attention_b16_causal.mlir" --schedule examples/schedules/ring_attention.sched
run_case loongtrain-2x4    examples/attention_2x4.mlir    --schedule examples/schedules/loongtrain.sched
run_case usp-2x4           examples/attention_2x4.mlir    --schedule examples/schedules/usp.sched
run_case ulysses           examples/attention.mlir        --schedule examples/schedules/ulysses.sched
run_case ulysses-kv-replicated examples/attention_gqa_kv4.mlir --schedule examples/schedules/ulysses_kv_replicated.sched
run_case tree-attention    examples/attention.mlir        --schedule examples/schedules/tree_attention.sched
run_case context-parallel  examples/attention.mlir        --schedule examples/schedules/context_parallel.sched
run_case asynctp-ag-gemm   examples/ag_gemm.mlir          --schedule examples/schedules/asynctp_ag_gemm.sched
run_case shift-reduce-rs   examples/gemm_rs.mlir          --schedule examples/schedules/shift_reduce.sched
run_case shift-reduce-halves-rs examples/gemm_rs.mlir    --schedule examples/schedules/shift_reduce_halves.sched
run_case megatron-rs       examples/gemm_rs.mlir          --schedule examples/schedules/megatron_rs.sched
run_case chunked-rs        examples/gemm_rs.mlir          --schedule examples/schedules/chunked_rs.sched
# The same schedule with C column-sharded: each row tile is one reduce-scatter along the columns
# (strided chunks of the tile).
sed 's/out sharding \[S(0), R\]/out sharding [R, S(0)]/' examples/gemm_rs.mlir > "$out/gemm_rs_cols.mlir"
run_case chunked-rs-cols   "$out/gemm_rs_cols.mlir"       --schedule examples/schedules/chunked_rs.sched
# A matrix-vector product (examples/weighted_sum.mlir, the paper's running example, f32, 4 ranks;
# tunable since 2026-12-03): rows split; the contraction split, partial sums all-reduced.
run_case gemv-rows examples/weighted_sum.mlir \
  --pass-pipeline 'builtin.module(tile{axis=i factor=4 outer=i0 inner=i_r0},parallelize{axis=i0 level=0 shard=false})'
run_case gemv-k    examples/weighted_sum.mlir \
  --pass-pipeline 'builtin.module(tile{axis=j factor=4 outer=j0 inner=j_r0},parallelize{axis=j0 level=0 shard=false})'
# The tensor-parallel MLP (issue 14): gemm patches with the generated GeLU epilogue between them.
PTX=$C/mlp_kernels.ptx run_case mlp-megatron examples/mlp.mlir --schedule examples/schedules/mlp_megatron.sched
PTX=$C/mlp_kernels.ptx run_case mlp-overlap  examples/mlp.mlir --schedule examples/schedules/mlp_overlap.sched
PTX=$C/mlp_kernels.ptx run_case mlp-ag-rs    examples/mlp.mlir --schedule examples/schedules/mlp_ag_rs.sched
odd_shape_cases
}
# Masked attention (issue 43): packed causal documents (fresh random boundaries each run: one
# token each, longer than a shard, hundreds), a causal and a two-sided sliding window, packed
# cross-attention with bottom-right alignment, under the shipped rings; the masked cases of
# the `masks` part (also under --alias 2 there).
mask_cases() {
run_case masks-docs-ring        examples/masks/documents_causal.mlir  --schedule examples/schedules/ring_attention.sched
run_case masks-docs-zigzag      examples/masks/documents_causal.mlir  --schedule examples/schedules/zigzag_ring.sched
run_case masks-window-ring      examples/masks/window_causal.mlir     --schedule examples/schedules/ring_attention.sched
run_case masks-window-zigzag    examples/masks/window_causal.mlir     --schedule examples/schedules/zigzag_ring.sched
run_case masks-two-sided-ring   examples/masks/window_two_sided.mlir  --schedule examples/schedules/ring_attention.sched
run_case masks-cross-lower-right examples/masks/cross_lower_right.mlir --schedule examples/schedules/ring_attention.sched
}
# Attention at the shapes other than Llama-3's D128 (examples/shapes/cases.txt: head dims 32,
# 64, 96 and 256, MLA 192/128 and 24/16, GQA D64 on a 3-level mesh, 3-D [h, s, d] tiles,
# cross-attention, decoding), each under a shipped schedule; small inputs (the 21 cases ran in
# 22 s on 8 virtual ranks of one H100). MERCURY_GPU_CASES selects among them by name as among
# the others.
odd_shape_cases() {
  local name file sched
  while read -r name file sched; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    if [[ "$sched" == --* ]]; then
      run_case "$name" "examples/shapes/$file" "$sched" < /dev/null
    else
      run_case "$name" "examples/shapes/$file" --schedule "examples/schedules/$sched" < /dev/null
    fi
  done < examples/shapes/cases.txt
}
: > "$out/table.md"
summary_title="8 virtual ranks on one GPU"
if [[ ",$parts," == *",schedules,"* ]]; then
  schedule_cases
fi
if [[ ",$parts," == *",masks,"* ]]; then
  echo "== cuDNN's variable-sequence graphs (ragged_probe: plan and f64 check per variant)"
  if $C/ragged_probe > "$out/ragged_probe.log" 2>&1 && ! grep -q WRONG "$out/ragged_probe.log"; then
    sed 's/^/   /' "$out/ragged_probe.log"
  else
    sed 's/^/   /' "$out/ragged_probe.log"; echo "   ragged_probe FAILED"; status=1
  fi
  mask_cases
  PLACE="--alias 2" TAG="alias2" mask_cases
  echo "== packed documents: our single-device packed attention vs flex_attention (document-causal)"
  PYTHONUNBUFFERED=1 python3 scripts/bench/packed_vs_flex.py --mercury-run $C/mercury-run \
    --device-kernels $C/device_kernels.ptx --out-dir "$out/packed" --out "$out/packed.json" \
    | tee "$out/packed.log" || status=1
  echo "== packed documents, reordered for the ring's ranks first (--balance-documents)"
  PYTHONUNBUFFERED=1 python3 scripts/bench/packed_vs_flex.py --mercury-run $C/mercury-run \
    --device-kernels $C/device_kernels.ptx --balance --routes cudnn \
    --out-dir "$out/packed_balanced" --out "$out/packed_balanced.json" \
    | tee "$out/packed_balanced.log" || status=1
  echo "== packed documents, reordered, on zigzag shards in 8 rounds (--balance --rounds 8)"
  PYTHONUNBUFFERED=1 python3 scripts/bench/packed_vs_flex.py --mercury-run $C/mercury-run \
    --device-kernels $C/device_kernels.ptx --balance --rounds 8 --routes cudnn \
    --out-dir "$out/packed_rounds" --out "$out/packed_rounds.json" \
    | tee "$out/packed_rounds.log" || status=1
fi
# The same schedules with their ranks on 2 and on 8 device ids aliasing GPU 0 (--alias): every
# transfer between ids takes the placed executor's peer-copy paths, and collectives whose group
# spans ids take the spanning (pull) paths, as on 2 or 8 GPUs; times are still one GPU's.
if [[ ",$parts," == *",aliased,"* ]]; then
  for k in ${MERCURY_GPU_ALIAS:-2 8}; do PLACE="--alias $k" TAG="alias$k" schedule_cases; done
  if [[ ",$parts," == *",schedules,"* ]]; then
    summary_title="8 virtual ranks on one GPU, then (aliasK) the ranks on K device ids aliasing it"
  else
    summary_title="the ranks on K device ids aliasing one GPU (aliasK)"
  fi
fi
echo
echo "== summary ($summary_title; times are the whole schedule vs the single-device patch)"
echo "| case | schedule ms | single-device ms | schedule/single | rel. error vs single | check |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
cat "$out/table.md"
echo

# ==== faults (issue 13 item 6; docs/multi-gpu.md, "Faults") ===================================
# A rank that dies or hangs must end every process within a bounded time, with a message naming
# the rank and the stage, and leave no GPU busy. Only with MERCURY_GPU_PARTS=faults (not in the
# default parts). Ring attention with 2 ranks and 8K tokens (3 stages; K/V travel in stage 2),
# --stage-timeout T (MERCURY_FAULT_STAGE_TIMEOUT, default 10 s). A process passes when it ends
# with the expected status and message within 2T + 20 s of the fault; an outer
# `timeout -s KILL` ends anything still running later (a FAIL). On two or more GPUs each
# process drives its own GPU (the issue's set-up). On one GPU both processes share GPU 0, each
# its own NCCL "host" over loopback sockets (NCCL_HOSTID, as the two-tier part), and the
# one-process case puts its 2 ranks on 2 device ids aliasing GPU 0 (--alias 2): the same fault
# paths (marks, NCCL abort, watchdog, SIGKILL/SIGTERM, _exit), on NCCL's socket transport
# instead of NVLink, and the summary says so.
# bg_proc LIMIT LOG CMD...: CMD in the background, killed after LIMIT seconds; LOG gets its
# output, LOG.end "exit-status unix-time" when it ends (the fault and two-tier parts).
bg_proc() {
  local limit=$1 log=$2; shift 2
  ( rc=0; timeout -s KILL "$limit" "$@" > "$log" 2>&1 || rc=$?; echo "$rc $(date +%s.%N)" > "$log.end" ) &
}
# fault_time LOG: the unix time an injected fault struck (printed by the faulty process).
fault_time() { grep -o 'at unix time [0-9.]*' "$1" | head -1 | awk '{print $4}' || true; }

if [[ ",$parts," == *",faults,"* ]]; then
fngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( fngpu < 1 )); then
  echo "== faults: skipped, no GPU present"
else
  if ! (ldconfig -p 2>/dev/null || true) | grep -q 'libnccl\.so '; then
    so=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF}' | head -1 || true)
    [[ -z "$so" ]] && so=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib","libnccl.so.2"))' 2>/dev/null || true)
    if [[ -n "$so" && -e "$so" ]]; then
      mkdir -p /tmp/mercury-nccl && ln -sf "$so" /tmp/mercury-nccl/libnccl.so
      export LD_LIBRARY_PATH="/tmp/mercury-nccl:${LD_LIBRARY_PATH:-}"
    fi
  fi
  T=${MERCURY_FAULT_STAGE_TIMEOUT:-10}
  bound=$((2 * T + 20))
  outer=$((bound + 150))
  fdir=$(mktemp -d)
  # Where the two processes run: their own GPUs, or both on GPU 0 as two NCCL hosts.
  if (( fngpu >= 2 )); then
    fwhere="2 GPUs, a process per GPU"
    gpu_of() { echo "$1"; }
    pair_env() { echo "LOCAL_RANK=$1"; }
    one_proc=(--devices 2)
  else
    fwhere="1 GPU: both processes on GPU 0, NCCL over loopback sockets (not the issue's 2 GPUs)"
    gpu_of() { echo 0; }
    pair_env() {
      echo "LOCAL_RANK=0 NCCL_HOSTID=mercury-node$1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
    }
    one_proc=(--alias 2)
  fi
  echo "== faults on $fwhere"
  sed -e 's/shape \[8\]/shape [2]/' -e 's/32768/8192/g' examples/attention.mlir > "$fdir/attention.mlir"
  sed 's/factor=8/factor=2/g' examples/schedules/ring_attention.sched > "$fdir/ring.sched"
  fcommon=(--backend cuda --seed 7 --stage-timeout "$T" --device-kernels "$C/device_kernels.ptx"
           "$fdir/attention.mlir" --schedule "$fdir/ring.sched")
  warm=(--bench --warmup 1 --iters 2)   # three runs: a fault @run=2 meets established connections
  : > "$out/faults-table.md"
  : > "$out/faults.log"
  # fault_proc LOG CMD...: bg_proc under the outer timeout.
  fault_proc() { bg_proc "$outer" "$@"; }
  # launch_pair NAME ARGS...: two processes, one GPU each, --launcher env (no torchrun).
  launch_pair() {
    local name=$1; shift
    rm -f "$fdir/id.$name"
    for r in 0 1; do
      # shellcheck disable=SC2046 # pair_env prints VAR=value words
      fault_proc "$fdir/$name-r$r.log" env RANK=$r WORLD_SIZE=2 $(pair_env $r) \
        MERCURY_NCCL_ID_FILE="$fdir/id.$name" NCCL_NVLS_ENABLE=0 \
        "$C/mercury-run" --launcher env --transport nccl "${fcommon[@]}" "$@"
    done
    wait
  }
  # check_proc CASE LOG WANT_RC REGEX T0: one row of the table.
  check_proc() {
    local case=$1 log=$2 want=$3 re=$4 t0=$5 rc=? end=0 dt=? ok=PASS why=""
    [[ -f "$log.end" ]] && read -r rc end < "$log.end"
    [[ -n "$t0" ]] && dt=$(awk -v a="$end" -v b="$t0" 'BEGIN{printf "%.1f", a-b}')
    [[ "$rc" == "$want" ]] || { ok=FAIL; why+="exit status $rc, expected $want; "; }
    grep -qE "$re" "$log" || { ok=FAIL; why+="no line matching /$re/; "; }
    if [[ "$dt" == "?" ]] || awk -v d="$dt" -v b="$bound" 'BEGIN{exit !(d > b)}'; then
      ok=FAIL; why+="ended ${dt} s after the fault (bound ${bound} s); "
    fi
    local msg
    msg=$(grep -m1 'error: ' "$log" || grep -m1 'check @' "$log" || grep -m1 'fault injection' "$log" || true)
    msg=$(echo "$msg" | cut -c1-240)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$case" "$(basename "$log" .log)" "$rc" "$dt" "$ok" "${why}${msg}" >> "$out/faults-table.md"
    { echo "---- $case: $(basename "$log") (exit $rc)"; tail -n 25 "$log"; } >> "$out/faults.log"
    [[ $ok == PASS ]] || status=1
  }
  # gpus_free CASE: no mercury-run of this script left, no compute process on the GPUs.
  gpus_free() {
    local left="" apps="" ok=PASS
    for _ in $(seq 30); do
      left=$(pgrep -f "$C/mercury-run" | tr '\n' ' ' || true)
      apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | tr '\n' ' ' || true)
      [[ -z "${left// }" && -z "${apps// }" ]] && break
      sleep 0.5
    done
    if [[ -n "${left// }" ]]; then
      ok=FAIL; status=1
      for p in $left; do kill -9 "$p" 2>/dev/null || true; done
    fi
    [[ -n "${apps// }" ]] && { ok=FAIL; status=1; }
    printf '| %s | GPUs afterwards | - | - | %s | processes left: %s; compute apps: %s; memory used: %s |\n' "$1" "$ok" \
      "${left:-none}" "${apps:-none}" "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null | tr '\n' ' ')" >> "$out/faults-table.md"
  }
  rank_re() { echo "^error: rank $1 \\(pid [0-9]+, GPU $(gpu_of "$1")\\) stage 2/3: ${2:-}"; }

  # pair_case N CASE NAME FAULT RC1 RE1 ARGS...: two processes with FAULT injected; rank 1 must
  # end with status RC1 and a line matching RE1, rank 0 with 1 and its report of stage 2.
  pair_case() {
    local n=$1 case=$2 name=$3 fault=$4 rc1=$5 re1=$6 t0; shift 6
    echo "== faults $n/7: $case: --inject-fault $fault"
    launch_pair "$name" --inject-fault "$fault" "$@"
    t0=$(fault_time "$fdir/$name-r1.log")
    check_proc "$case" "$fdir/$name-r1.log" "$rc1" "$re1" "$t0"
    check_proc "$case" "$fdir/$name-r0.log" 1 "$(rank_re 0)" "$t0"
    gpus_free "$case"
  }
  # Rank 1 kills itself (SIGKILL) in the second run, when the NCCL connections are up and the
  # survivor's NCCL kernels will spin; then in the first run, where the survivor meets the dead
  # peer at its first NCCL connection; a device-side hang of rank 1's streams; a host thread
  # that blocks forever.
  pair_case 1 "exit, warm" exit exit-rank=1@stage=2@run=2 137 \
    'fault injection exit-rank=1@stage=2@run=2: rank 1 .* kills its process' "${warm[@]}"
  pair_case 2 "exit, first run" exitcold exit-rank=1@stage=2 137 'kills its process'
  pair_case 3 "device hang" hang hang-rank=1@stage=2@run=2 1 "$(rank_re 1)" "${warm[@]}"
  pair_case 4 "host hang" hosthang host-hang-rank=1@stage=2@run=2 1 \
    "$(rank_re 1 'no progress .*host thread is blocked')" "${warm[@]}"

  echo "== faults 5/7: one process, ${one_proc[*]}, peer copies: hang-rank=1@stage=2@run=2"
  fault_proc "$fdir/peer.log" "$C/mercury-run" "${one_proc[@]}" --transport peer "${fcommon[@]}" \
    --inject-fault hang-rank=1@stage=2@run=2 "${warm[@]}"
  wait
  t0=$(fault_time "$fdir/peer.log")
  # (Under --alias a report may name the device id or GPU 0: either is the rank's.)
  pre='^error: rank 1 \(pid [0-9]+, GPU [0-9]+\) stage 2/3: no progress'
  (( fngpu >= 2 )) && pre=$(rank_re 1 'no progress')
  check_proc "peer copies, one process" "$fdir/peer.log" 1 "$pre" "$t0"
  gpus_free "peer copies, one process"

  if command -v torchrun >/dev/null 2>&1; then
    echo "== faults 6/7: torchrun, 2 processes, SIGKILL to process 1 during the runs"
    tlog="$fdir/torchrun.log"
    # torchrun gives each worker LOCAL_RANK; on one GPU a shell in between sets this script's
    # pair_env for the worker's RANK and execs mercury-run (the pid torchrun's worker has).
    fault_proc "$tlog" env MERCURY_NCCL_ID_FILE="$fdir/id.torchrun" NCCL_NVLS_ENABLE=0 \
      torchrun --standalone --nproc_per_node=2 --no-python \
      bash -c "$(declare -f pair_env); export \$(pair_env \$RANK); exec \"\$0\" \"\$@\"" \
      "$C/mercury-run" --launcher env --transport nccl "${fcommon[@]}" --bench --warmup 3 --iters 20000
    for _ in $(seq 360); do
      up=$(grep -c 'transport:' "$tlog" 2>/dev/null || true)
      (( ${up:-0} >= 2 )) && break
      [[ -f "$tlog.end" ]] && break
      sleep 0.5
    done
    sleep 3
    victim=$(grep -o '\[process 1/2\] gpu: .*pid [0-9]*' "$tlog" | grep -o '[0-9]*$' | head -1 || true)
    t0=""
    if [[ -n "$victim" ]] && kill -0 "$victim" 2>/dev/null; then
      t0=$(date +%s.%N)
      kill -9 "$victim"
      echo "   killed pid $victim (process 1) with SIGKILL"
    else
      echo "   process 1 not found running (pid '${victim}'): FAIL"
    fi
    wait
    check_proc "torchrun SIGKILL" "$tlog" 1 'error: rank 0 \(pid [0-9]+, GPU 0\) ' "$t0"
    grep -E 'Signal 9|exitcode|rank +:' "$tlog" | head -6 | sed 's/^/   torchrun: /' || true
    gpus_free "torchrun SIGKILL"
  else
    echo "== faults 6/7: torchrun not found: SIGKILL case skipped"
    printf '| torchrun SIGKILL | - | - | - | SKIPPED | torchrun not found |\n' >> "$out/faults-table.md"
  fi

  echo "== faults 7/7: a healthy 2-process run afterwards (the GPUs are usable)"
  launch_pair healthy --check
  for r in 0 1; do
    check_proc "healthy run" "$fdir/healthy-r$r.log" 0 'check @O .*ok' "$(date +%s.%N)"
  done

  echo
  echo "== faults summary ($fwhere; stage timeout ${T} s; every process must end within ${bound} s of the fault)"
  echo "| case | process | exit | s after fault | result | message / why |"
  echo "| --- | --- | ---: | ---: | --- | --- |"
  cat "$out/faults-table.md"
  echo "(last lines of every log: $out/faults.log)"
  echo
fi
fi

# ==== the attention backward (issue 38) =====================================================
# The cuDNN backward patch (mercury-gpu-bench P2b): fresh random inputs, gradients poisoned,
# non-finite counts over every gradient, sampled rows against f64 on the host (on the very O and
# lse the backward read, and end to end with the forward recomputed in f64), the awkward lengths
# of the known NaN traps (s % 128 == 64); then timed beside torch's cuDNN backward on the same
# shapes and inputs, both sides in one regime (ratio > 1: ours faster), and the cost of a ring
# block's adds into f32 accumulators.
if [[ ",$parts," == *",backward,"* ]]; then
  regime="${MERCURY_REGIME:-sustained=1500}"
  echo "== torch cuDNN SDPA backward baseline (--regime $regime)"
  PYTHONUNBUFFERED=1 python3 $C/sdpa_bwd_baseline.py ${MERCURY_SDPA_CASES:+--cases "$MERCURY_SDPA_CASES"} \
    --regime "$regime" --out "$out/sdpa_bwd.json" > "$out/sdpa_bwd.log" 2>&1 \
    || { echo "sdpa backward baseline failed"; tail -5 "$out/sdpa_bwd.log"; }
  echo "== mercury-gpu-bench --only P2b (--regime $regime)"
  $C/mercury-gpu-bench --device-kernels-ptx $C/device_kernels.ptx --sdpa-json "$out/sdpa_bwd.json" \
    --regime "$regime" --only P2b --json-out "$out/bench_bwd.json" > "$out/bench_bwd.log" 2>&1 || status=1
  sed -n '/==== summary/,$p' "$out/bench_bwd.log" | cut -c1-240
  # The ring backward on 8 virtual ranks (examples/attention_bwd.mlir; --shift-shard: K and V
  # travel, dK/dV partials return to their owners; causal: zigzag placement) against the
  # single-device backward, checked (also f64 rows) and timed side by side.
  sed 's/causal = true/causal = false/' examples/attention_bwd.mlir > "$out/attention_bwd_noncausal.mlir"
  run_case ring-bwd-mha            "$out/attention_bwd_noncausal.mlir" --kernel attention_bwd --shift-shard
  run_case zigzag-bwd-mha-causal   examples/attention_bwd.mlir --kernel attention_bwd --shift-shard
  run_case zigzag-bwd-gqa-causal   examples/attention_bwd.mlir --kernel attention_bwd_gqa --shift-shard
  run_case zigzag-bwd-mla-causal   examples/attention_bwd.mlir --kernel attention_bwd_mla --shift-shard
  # ring-flash-attn's variant (the dK/dV accumulators travel with K and V, `carry`), same cases.
  run_case ring-flash-bwd-mha      "$out/attention_bwd_noncausal.mlir" --kernel attention_bwd --schedule examples/schedules/ring_flash_attn_bwd.sched
  run_case zigzag-flash-bwd-mha-causal examples/attention_bwd.mlir --kernel attention_bwd --schedule examples/schedules/zigzag_ring_flash_attn_bwd.sched
  run_case zigzag-flash-bwd-gqa-causal examples/attention_bwd.mlir --kernel attention_bwd_gqa --schedule examples/schedules/zigzag_ring_flash_attn_bwd.sched
  # The ring's gradients as the ring grows (MERCURY_BWD_RANKS, default 2 4 16 32 64 virtual
  # ranks; 8 is above): the difference from the single-device cuDNN backward on the same
  # inputs and the f64 rows' error, from mercury-run --check.
  for n in ${MERCURY_BWD_RANKS:-2 4 16 32 64}; do
    sed "s/shape \[8\]/shape [$n]/" "$out/attention_bwd_noncausal.mlir" > "$out/attention_bwd_r$n.mlir"
    run_case "ring-bwd-mha-r$n" "$out/attention_bwd_r$n.mlir" --kernel attention_bwd --shift-shard
  done
  # Keys no query sees (cross lengths, causal): their gradients come from accumulators that
  # start and stay at zero (SlotInit::MaskedZero).
  run_case cross-bwd-ring  examples/shapes/cross_bwd_d64_causal.mlir --schedule examples/schedules/ring_attention_bwd.sched
  run_case cross-bwd-usp   examples/shapes/cross_bwd_d64_causal.mlir --schedule examples/schedules/usp_bwd.sched
  echo "| case | schedule ms | single-device ms | ratio | check rel. difference | |"; grep -- "-bwd-" "$out/table.md" || true
  # A training step (mercury-run --backward): the forward, then the backward on its outputs and
  # a fresh dO, each checked against its single-device plan and f64 rows.
  echo "== mercury-run --backward: examples/small/attention_train.mlir --shift-shard, 8 virtual ranks"
  $C/mercury-run examples/small/attention_train.mlir --backward attention_bwd --shift-shard --backend cuda \
    --virtual --check --device-kernels $C/device_kernels.ptx > "$out/train-step.log" 2>&1 || status=1
  grep -E '^(forward|backward|check|gpu)|error' "$out/train-step.log" | sed 's/^/   /' || true
fi

# ==== the patches' rate tables (only with MERCURY_GPU_PARTS=rates; any number of GPUs) =======
# mercury-mgpu links --measure-rates on GPU 0: the GEMM and attention patches timed at the grid
# of bench::RateGrid, written with the local copy into $out/topology-rates.toml (the mgpu part
# does the same with the links between GPUs). The tables go into topologies/*.toml by hand.
if [[ ",$parts," == *",rates,"* ]]; then
  echo "== mercury-mgpu links --measure-rates --max-devices 1"
  if $C/mercury-mgpu links --measure-rates --max-devices 1 --out "$out/topology-rates.toml" > "$out/rates.log" 2>&1; then
    grep -E '^  R\.|^gemm_tflops|^attention' "$out/rates.log" || true
  else
    status=1; tail -20 "$out/rates.log"
  fi
fi

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
  echo "== mercury-mgpu links --measure-rates (copies between every pair; the patches' rate tables on GPU 0)"
  $C/mercury-mgpu links --measure-rates --out "$out/topology-measured.toml" > "$out/links.log" 2>&1 || status=1
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
      --device-kernels "${PTX:-$C/device_kernels.ptx}" "$@" > "$out/mgpu-$name.log" 2>&1 || { r="FAILED"; status=1; }
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
    # Zigzag causal rings on 2 GPUs (issue 12), inputs declared zigzag as torch CP's are.
    for f in attention_causal_s32k attention_causal_s128k attention_gqa_causal_s128k; do
      run_mgpu_case "zigzag-${f#attention_}-2gpu-$t" "examples/2gpu/$f.mlir" --shift-shard --devices 2 --transport "$t"
    done
    # The tensor-parallel MLP on 2 GPUs (issue 14).
    for sc in mlp_megatron mlp_overlap mlp_ag_rs; do
      PTX=$C/mlp_kernels.ptx run_mgpu_case "${sc}-2gpu-$t" examples/mlp.mlir --schedule "examples/schedules/$sc.sched" --devices 2 --transport "$t"
    done
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
# ==== the side-by-side suite (issue 13): ours on every GPU, one rank per GPU ==================
# The cases of scripts/suite_cases.sh (attention MHA and GQA at B1 and B16, causal and not; the
# all-gather GEMM and GEMM reduce-scatter; the Llama-3 MLPs on 2 GPUs), each checked against the
# single-device plan and priced by the cost model beside its measured time. The rows go to
# $out/suite-ours.tsv; after the baselines part, scripts/suite_table.py joins them.
# MERCURY_SUITE_CASES: a regex over the case ids (default: all); MERCURY_SUITE_SEQS: the batch-1
# sequence lengths (default "32768 131072"; add 524288 for the 512K rows).
if [[ ",$parts," == *",suite,"* ]]; then
sngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( sngpu < 2 )); then
  echo "== suite: skipped, only ${sngpu} GPU present"
else
  sgen=$(mktemp -d)
  : > "$out/suite-ours.tsv"
  # The cost model prices every case on a topology of as many GPUs as the case runs on
  # (mercury-run --predict), printed beside the measured time: MERCURY_SUITE_TOPOLOGY, else
  # topologies/h200-1xN-measured.toml (written by `mercury-mgpu links` on this machine kind);
  # without such a file the cases run unpriced.
  suite_topo() {
    local f="${MERCURY_SUITE_TOPOLOGY:-topologies/h200-1x$1-measured.toml}"
    [[ -f $f ]] && echo "$f"
  }
  suite_case() {  # id input schedule-args...
    local id="$1" input="$2"; shift 2
    if [[ -n "${MERCURY_SUITE_CASES:-}" && ! "$id" =~ $MERCURY_SUITE_CASES ]]; then return 0; fi
    echo "== suite: $id ($*)"
    local log="$out/suite-$id.log" r=ok
    timeout 300 $C/mercury-run --backend cuda --devices "${DEVS:-$sngpu}" --transport peer --check --bench \
      --iters "${MERCURY_SUITE_ITERS:-5}" --warmup "${MERCURY_SUITE_WARMUP:-2}" --device-kernels "${PTX:-$C/device_kernels.ptx}" \
      $(t=$(suite_topo "${DEVS:-$sngpu}") && echo --predict "$t") "$input" "$@" > "$log" 2>&1 || r=FAILED
    local ms pred
    ms=$(grep '^| schedule,' "$log" | awk -F'|' '{print $3}' | xargs || true)
    pred=$(grep -m1 '^model: predicted' "$log" | awk '{print $3}' || true)
    grep -q "FAIL" "$log" && r=FAILED
    printf '%s\t%s\t%s\t%s\t%s\n' "$id" "${ms:-nan}" "$r" "$*" "${pred:-nan}" >> "$out/suite-ours.tsv"
    grep -E "check|schedule,|warning|error|^model" "$log" | sed 's/^/   /' | head -8 || true
  }
  # The cases (scripts/suite_cases.sh): operators written into $sgen, one line each.
  bash scripts/suite_cases.sh "$sgen" "$sngpu" > "$sgen/cases.tsv"
  while IFS=$'\t' read -r -a c <&3; do
    ptx=$C/device_kernels.ptx; [[ ${c[2]} == mlp ]] && ptx=$C/mlp_kernels.ptx
    DEVS=${c[1]} PTX=$ptx suite_case "${c[0]}" "${c[3]}" "${c[@]:4}"
  done 3< "$sgen/cases.tsv"
fi
fi

# ==== profile-guided search (issue 13 item 3; only with MERCURY_GPU_PARTS=tune) =================
# mercury-tune --profile-top 4: the cost model's 4 best candidates run checked on the GPUs
# (mercury-run's --check --bench code), the measured best chosen. One line per case: the model's
# pick, the measured pick, whether the model's pick is within 5% of the measured best, Kendall's
# tau between predicted and measured times, GPU-seconds spent profiling. Operators keep their
# declared mesh: [2] on 2 GPUs (topologies/h200-1x2-measured.toml), [8] as 8 virtual ranks on
# GPU 0 (h200-1x8: the model prices 8 GPUs, the measurement shares one: its ranking error is
# not the 8-GPU machine's).
if [[ ",$parts," == *",tune,"* ]]; then
tngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
tgen="$out/tune-ops"; mkdir -p "$tgen"
sed 's/shape \[8\]/shape [2]/' examples/attention.mlir > "$tgen/mha_s32k_2.mlir"
sed 's/shape \[8\]/shape [2]/' examples/ag_gemm.mlir > "$tgen/ag_gemm_2.mlir"
sed 's/shape \[8\]/shape [2]/' examples/gemm_rs.mlir > "$tgen/gemm_rs_2.mlir"
: > "$out/tune-table.md"
tune_case() {  # name operator topology mercury-tune-flags...
  local name="$1" op="$2" topo="$3"; shift 3
  if [[ -n "${MERCURY_GPU_CASES:-}" && ! "$name" =~ $MERCURY_GPU_CASES ]]; then return 0; fi
  echo "== mercury-tune --profile-top 4: $name ($op on $topo, $*)"
  local log="$out/tune-$name.log" r=ok
  timeout 240 $C/mercury-tune "$op" --topology "$topo" --out "$out/tune-$name" --profile-top 4 \
    --iters 5 --warmup 2 --device-kernels $C/device_kernels.ptx "$@" > "$log" 2>&1 || { r="FAILED"; status=1; }
  grep -E "^(chosen|schedule|searched|profile|  model|time):|^  model|warning|error" "$log" | sed 's/^/   /' || true
  # "  model pick A | measured pick B | within 5%: W | Kendall tau T | median ... | GPU-seconds G"
  local line; line=$(grep -m1 '^  model pick ' "$log" || true)
  local mp meas w tau gs
  mp=$(sed -n 's/^  model pick \(.*\) | measured pick .*/\1/p' <<< "$line")
  meas=$(sed -n 's/.* | measured pick \(.*\) | within 5%.*/\1/p' <<< "$line")
  w=$(sed -n 's/.* | within 5%: \([^|]*\) |.*/\1/p' <<< "$line" | xargs)
  tau=$(sed -n 's/.* | Kendall tau \([^ ]*\) |.*/\1/p' <<< "$line")
  gs=$(sed -n 's/.* GPU-seconds \([0-9.]*\)$/\1/p' <<< "$line")
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "${mp:--}" "${meas:--}" "${w:--}" "${tau:--}" "${gs:--}" "$r" | tee -a "$out/tune-table.md"
}
if (( tngpu >= 2 )); then
  tune_case mha-s32k-2gpu        "$tgen/mha_s32k_2.mlir"                 topologies/h200-1x2-measured.toml --devices 2 --transport peer
  tune_case causal-s32k-2gpu     examples/2gpu/attention_causal_s32k.mlir topologies/h200-1x2-measured.toml --devices 2 --transport peer
  tune_case ag-gemm-8192-2gpu    "$tgen/ag_gemm_2.mlir"                  topologies/h200-1x2-measured.toml --devices 2 --transport peer
  tune_case rs-gemm-8192-2gpu    "$tgen/gemm_rs_2.mlir"                  topologies/h200-1x2-measured.toml --devices 2 --transport peer
else
  echo "== tune: 2-GPU cases skipped, only ${tngpu} GPU present"
fi
tune_case mha-s32k-8virtual      examples/attention.mlir        h200-1x8 --virtual
tune_case causal-s32k-8virtual   examples/attention_causal.mlir h200-1x8 --virtual
tune_case ag-gemm-8192-8virtual  examples/ag_gemm.mlir          h200-1x8 --virtual
tune_case rs-gemm-8192-8virtual  examples/gemm_rs.mlir          h200-1x8 --virtual
# The matrix-vector product (tunable since 2026-12-03) as 4 virtual ranks; the model prices 4 H100s.
tune_case gemv-4096-4virtual     examples/weighted_sum.mlir     h100-1x4 --virtual
# The 2-rank GEMM reduce-scatter as 2 virtual ranks (the 2-GPU case's candidates on one GPU).
tune_case rs-gemm-8192-2virtual  "$tgen/gemm_rs_2.mlir"         topologies/h200-1x2-measured.toml --virtual
echo
echo "== profile-guided search (mercury-tune --profile-top 4; times in $out/tune-*/tuning-report.md)"
echo "| case | model pick | measured pick | model pick within 5% | Kendall tau | GPU-seconds | run |"
echo "| --- | --- | --- | --- | ---: | ---: | --- |"
cat "$out/tune-table.md"
fi

# ==== Two tiers on one host (issue 13 item 4; not default) ====================================
# Two processes act as two "nodes", each driving 4 virtual ranks on one GPU (mesh [2, 4]); NCCL
# joins them through one bridge rank per process, forced onto its socket transport (the slow
# tier); ranks of one process exchange data by device copies (the fast tier). With one GPU
# both processes share it: NCCL_HOSTID gives each its own "host" (else NCCL refuses two ranks
# on one GPU), and the topology divides the GPU's rates by 8 instead of 4. Measures both tiers
# into a topology file, lets the search rank every candidate on it (mercury-tune
# --refactor-mesh), runs the known templates and the pick, checked, and prints predicted and
# measured rankings side by side (scripts/two_tier_table.py).
if [[ ",$parts," == *",twotier,"* ]]; then
  tdir="$out/twotier"; mkdir -p "$tdir"
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  echo "== two tiers: 2 processes x 4 virtual ranks on $ngpu GPU(s), NCCL socket between them"
  # tt_pair NAME CMD...: CMD in two processes (RANK 0 and 1), each its own NCCL "host";
  # NAME-rR.log gets the output, NAME-rR.log.end "exit-status unix-time" (bg_proc); fails
  # unless both exit 0. Each process is killed after $tt_limit seconds (default 240).
  tt_pair() {
    local name=$1; shift
    rm -f "$tdir/id.$name"
    for r in 0 1; do
      bg_proc "${tt_limit:-240}" "$tdir/$name-r$r.log" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
        MERCURY_NCCL_ID_FILE="$tdir/id.$name" \
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
        NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "$@"
    done
    wait
    rm -f "$tdir/id.$name"
    local rc0 rc1 _t
    read -r rc0 _t < "$tdir/$name-r0.log.end"
    read -r rc1 _t < "$tdir/$name-r1.log.end"
    [[ $rc0 == 0 && $rc1 == 0 ]]
  }
  # The ranks sharing each GPU (8 on one GPU, 4 on two) are found by the tool itself.
  if tt_pair links "$C/mercury-mgpu" links --launcher env --ranks-per-process 4 \
      --max-mib 256 --reps 5 --attention-tflops 627 --attention-causal-tflops 640 --out "$tdir/two-tier.toml"; then
    grep -E '^#   |ranks per|bandwidth_gbs|latency_us|_tflops' "$tdir/two-tier.toml" | sed 's/^/   /'
    for op in mha gqa; do
      file=examples/attention_2x4.mlir; [[ $op == gqa ]] && file=examples/two_tier/attention_gqa_2x4.mlir
      "$C/mercury-tune" "$file" --topology "$tdir/two-tier.toml" --out "$tdir/tune-$op" --refactor-mesh \
        > "$tdir/tune-$op.log" 2>&1 || { echo "   mercury-tune $op failed"; tail -3 "$tdir/tune-$op.log"; status=1; continue; }
      sed -n '3,4p' "$tdir/tune-$op.log" | sed 's/^/   /'
      for t in "$tdir/tune-$op"/templates/mesh_8__*.transform "$tdir/tune-$op"/templates/mesh_2x4__*.transform \
               "$tdir/tune-$op/schedule.transform"; do
        [[ -f $t ]] || continue
        if [[ -n "${MERCURY_GPU_CASES:-}" && ! "$op $t" =~ $MERCURY_GPU_CASES ]]; then continue; fi
        name="$op.$(basename "$t" .transform)"
        tt_pair "run.$name" "$C/mercury-run" --backend cuda --launcher env --virtual --transport nccl \
          --check --bench --warmup 2 --iters 5 --device-kernels "$C/device_kernels.ptx" "$file" --schedule "$t" \
          || { echo "   $name: failed (logs in twotier.tgz, run.$name-r*.log):"; tail -n 2 "$tdir/run.$name"-r*.log | cut -c1-400; }
        grep -h "check @\|| schedule\|error" "$tdir/run.$name"-r*.log | cut -c1-200 | sed "s/^/   $name: /" || true
      done
      # The paper's search: compile and profile the survivors on the machine, both processes
      # together (mercury-tune --profile-top under the launcher; process 0 writes tune-prof-OP).
      if [[ -z "${MERCURY_GPU_CASES:-}" || "$op profile" =~ $MERCURY_GPU_CASES ]]; then
        tt_limit=480 tt_pair "tune-prof-$op" "$C/mercury-tune" "$file" --topology "$tdir/two-tier.toml" \
          --out "$tdir/tune-prof-$op" --refactor-mesh --profile-top "${MERCURY_TWOTIER_PROFILE_TOP:-6}" \
          --launcher env --virtual --transport nccl --warmup 2 --iters 5 --device-kernels "$C/device_kernels.ptx" \
          || { echo "   profile $op: failed (logs in twotier.tgz, tune-prof-$op-r*.log):"; tail -n 3 "$tdir/tune-prof-$op"-r*.log | cut -c1-400; status=1; }
        grep -h "^  model pick\|DROPPED\|^chosen" "$tdir/tune-prof-$op-r0.log" | cut -c1-300 | sed "s/^/   profile $op: /" || true
      fi
    done
    # A rank that dies under the bridge: rank 5 (process 1) kills itself in stage 2 of the
    # second run; process 0 must end within 40 s of it, with a report naming a rank and stage.
    ring="$tdir/tune-mha/templates/mesh_8__L0_ring.transform"
    if [[ -f $ring && ( -z "${MERCURY_GPU_CASES:-}" || "fault" =~ $MERCURY_GPU_CASES ) ]]; then
      echo "== two tiers: fault: --inject-fault exit-rank=5@stage=2@run=2 (process 1 dies)"
      tt_pair fault "$C/mercury-run" --backend cuda --launcher env --virtual --transport nccl \
        --stage-timeout 10 --bench --warmup 1 --iters 2 --device-kernels "$C/device_kernels.ptx" \
        examples/attention_2x4.mlir --schedule "$ring" --inject-fault exit-rank=5@stage=2@run=2 || true
      tf=$(fault_time "$tdir/fault-r1.log")
      read -r rc0 e0 < "$tdir/fault-r0.log.end"; read -r rc1 _t < "$tdir/fault-r1.log.end"
      dt=$(awk -v a="$e0" -v b="${tf:-0}" 'BEGIN{printf "%.1f", a-b}')
      msg=$(grep -m1 '^error: ' "$tdir/fault-r0.log" | cut -c1-300 || true)
      verdict=PASS
      if [[ -z "$tf" || $rc1 != 137 || $rc0 != 1 || -z "$msg" ]] || awk -v d="$dt" 'BEGIN{exit !(d > 40)}'; then
        verdict=FAIL; status=1
      fi
      echo "   | bridge fault | process 1 exit $rc1 | process 0 exit $rc0, ${dt} s after the fault | $verdict | $msg |" \
        | tee "$out/two-tier-fault.md"
    fi
    # Processes started with different arguments (here --seed) must refuse before anything
    # runs, not pair their NCCL calls wrongly.
    if [[ -f $ring && ( -z "${MERCURY_GPU_CASES:-}" || "mismatch" =~ $MERCURY_GPU_CASES ) ]]; then
      echo "== two tiers: processes that disagree (--seed 7 and 8)"
      tt_pair mismatch bash -c 'exec "$@" --seed $((7 + RANK))' _ "$C/mercury-run" --backend cuda \
        --launcher env --virtual --transport nccl --check --device-kernels "$C/device_kernels.ptx" \
        examples/attention_2x4.mlir --schedule "$ring" || true
      verdict=PASS
      for r in 0 1; do
        read -r rc _t < "$tdir/mismatch-r$r.log.end"
        grep -q 'runs a different plan, --seed or run count' "$tdir/mismatch-r$r.log" && [[ $rc == 1 ]] \
          || { verdict=FAIL; status=1; }
      done
      echo "   | processes that disagree | $verdict | $(grep -h -m1 'runs a different' "$tdir"/mismatch-r0.log | cut -c1-240) |" \
        | tee -a "$out/two-tier-fault.md"
    fi
    # One rank per process: the world without a bridge (a handle per rank, its splits and
    # duplicates), both processes on GPU 0 (LOCAL_RANK=0; NCCL_HOSTID keeps them apart): a
    # checked zigzag ring of 2, then the profile-guided search of it in both processes.
    if [[ -z "${MERCURY_GPU_CASES:-}" || "perrank" =~ $MERCURY_GPU_CASES ]]; then
      echo "== two tiers: one rank per process (no bridge): checked ring of 2, then --profile-top 3"
      f2=examples/2gpu/attention_causal_s32k.mlir
      for what in run tune; do
        if [[ $what == run ]]; then
          cmd=("$C/mercury-run" --backend cuda --launcher env --transport nccl --check --bench
               --warmup 2 --iters 5 --device-kernels "$C/device_kernels.ptx" "$f2" --shift-shard)
        else
          cmd=("$C/mercury-tune" "$f2" --topology topologies/h200-1x2-measured.toml
               --out "$tdir/tune-perrank" --profile-top 3 --launcher env --transport nccl
               --warmup 2 --iters 5 --device-kernels "$C/device_kernels.ptx")
        fi
        tt_pair "perrank-$what" env LOCAL_RANK=0 "${cmd[@]}" && v=PASS || { v=FAIL; status=1; }
        echo "   | one rank per process, $what | $v | $(grep -h -m2 'check @\|model pick\|error' "$tdir/perrank-$what-r0.log" | cut -c1-200 | tr '\n' ' ') |"
      done
      # A schedule cache entry (tuned in one process) held against a launched run: process 0
      # compares the slowest process's time with the entry's, process 1 says so.
      "$C/mercury-tune" "$f2" --topology topologies/h200-1x2-measured.toml --out "$tdir/tune-cache" \
        --cache "$tdir/cache" --profile-top 1 --virtual --warmup 1 --iters 3 \
        --device-kernels "$C/device_kernels.ptx" > "$tdir/tune-cache.log" 2>&1 || true
      entry=$(grep -m1 -o '^cache: *[^ ]*\.json' "$tdir/tune-cache.log" | awk '{print $2}' || true)
      v=FAIL
      if [[ -n $entry ]] && tt_pair perrank-cache env LOCAL_RANK=0 "$C/mercury-run" --backend cuda \
          --launcher env --transport nccl --bench --warmup 1 --iters 3 --device-kernels "$C/device_kernels.ptx" \
          "$f2" --schedule "$tdir/tune-cache/schedule.transform" --cache-file "$entry" \
          && grep -q '^cache: \(within\|schedule is SUSPECT\)' "$tdir/perrank-cache-r0.log" \
          && grep -q 'cache: process 0 holds' "$tdir/perrank-cache-r1.log"; then v=PASS; else status=1; fi
      echo "   | one rank per process, --cache-file | $v | $(grep -h -m1 '^cache:\|error' "$tdir/perrank-cache-r0.log" 2>/dev/null | cut -c1-200) |"
    fi
    # Candidates every process refuses at the executor build are dropped in all of them, and
    # profiling goes on: the small operator is f32, which the attention patch refuses (it needs
    # bf16), so all 14 candidates are refused in turn; both processes must end together (within
    # 10 s), exit 1, with "no candidate passed its checked run" and the same refusals.
    if [[ -z "${MERCURY_GPU_CASES:-}" || "dropped" =~ $MERCURY_GPU_CASES ]]; then
      echo "== two tiers: --profile-top 14 where every process refuses every candidate"
      tt_pair dropped "$C/mercury-tune" examples/small/attention.mlir --topology "$tdir/two-tier.toml" \
        --out "$tdir/tune-dropped" --refactor-mesh --profile-top 14 --launcher env --virtual \
        --transport nccl --warmup 1 --iters 3 --device-kernels "$C/device_kernels.ptx" || true
      read -r rc0 e0 < "$tdir/dropped-r0.log.end"; read -r rc1 e1 < "$tdir/dropped-r1.log.end"
      n0=$(grep -o 'run failed:' "$tdir/dropped-r0.log" | wc -l); n1=$(grep -o 'run failed:' "$tdir/dropped-r1.log" | wc -l)
      v=PASS
      if [[ $rc0 != 1 || $rc1 != 1 ]] || (( n0 < 14 || n0 != n1 )) \
          || ! grep -q 'no candidate passed its checked run' "$tdir/dropped-r0.log" \
          || ! grep -q 'no candidate passed its checked run' "$tdir/dropped-r1.log" \
          || awk -v a="$e0" -v b="$e1" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d > 10)}'; then
        v=FAIL; status=1
      fi
      echo "   | every candidate refused in both processes | $v | exits $rc0 and $rc1, $(awk -v a="$e0" -v b="$e1" 'BEGIN{d=a-b; if (d<0) d=-d; printf "%.1f", d}') s apart; refusals reported $n0 / $n1 times |"
    fi
    python3 scripts/two_tier_table.py "$tdir" | tee "$out/two-tier-table.md"
    cp "$tdir/two-tier.toml" "$out/two-tier.toml"
  else
    echo "   links measurement failed:"; tail -5 "$tdir"/links-r*.log; status=1
  fi
  # Logs, the search's outputs: one archive (the device tool brings back few files).
  tar czf "$out/twotier.tgz" -C "$out" twotier && rm -rf "$tdir"
fi

# ==== torch: the mercury Python package on CUDA tensors (issue 37; scripts/torch_gpu.py) =======
# The staged wheel installed into a folder of its own (no index, no dependencies: torch is the
# machine's); the executor's device kernels from device_kernels.ptx.
if [[ ",$parts," == *",torch,"* ]]; then
  # Outside $out: the installed package is not a result to bring back.
  site="${TMPDIR:-/tmp}/mercury-torch-site"
  rm -rf "$site"
  if ! python3 -m pip install -q --no-index --no-deps --target "$site" $C/mercury_rs-*.whl > "$out/torch-install.log" 2>&1; then
    echo "== torch: the wheel did not install"; tail -5 "$out/torch-install.log"; status=1
  else
    tenv=(env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" MERCURY_DEVICE_KERNELS="$PWD/$C/device_kernels.ptx"
          MERCURY_CACHE_DIR="$out/torch-schedules" MERCURY_ROOT="$PWD" PYTHONUNBUFFERED=1)
    # MERCURY_GPU_TORCH: which of the four steps (default all).
    steps=",${MERCURY_GPU_TORCH:-world1,pair,llama,bench},"
    if [[ $steps == *,world1,* ]]; then
    echo "== torch 1/4: world size 1 and op(**inputs) on virtual ranks, against torch"
    timeout 600 "${tenv[@]}" python3 $C/torch_gpu.py world1 > "$out/torch-world1.log" 2>&1 || status=1
    grep -E '^(device|check|note|[0-9]+ failed)|Error|error' "$out/torch-world1.log" | sed 's/^/   /' || true
    fi
    if [[ $steps == *,pair,* ]]; then
    echo "== torch 2/4: two processes sharing GPU 0 over NCCL sockets (nccl_pair)"
    nccl_pair "$out" torch-pair 300 "${tenv[@]}" python3 $C/torch_gpu.py pair || { echo "   pair exit statuses: $pair_rc"; status=1; }
    for r in 0 1; do grep -E '^(check|note|[0-9]+ failed)|Error|error' "$out/torch-pair-r$r.log" | sed 's/^/   /' || true; done
    fi
    if [[ $steps == *,llama,* ]]; then
    echo "== torch 3/4: examples/torch/llama_attention.py, world size 1, then two processes sharing GPU 0 (nccl_pair)"
    timeout 300 "${tenv[@]}" python3 examples/torch/llama_attention.py > "$out/torch-llama.log" 2>&1 || status=1
    grep -E '^(llama|check|time)|Error|error' "$out/torch-llama.log" | sed 's/^/   /' || true
    nccl_pair "$out" torch-llama 300 env MASTER_ADDR=127.0.0.1 MASTER_PORT=29518 "${tenv[@]}" \
      python3 examples/torch/llama_attention.py || { echo "   llama pair exit statuses: $pair_rc"; status=1; }
    grep -hE '^(llama|check|time)|Error|error' "$out/torch-llama-r0.log" "$out/torch-llama-r1.log" | sed 's/^/   /' || true
    fi
    if [[ $steps == *,bench,* ]]; then
    echo "== torch 4/4: mercury.attention vs torch cuDNN SDPA, world size 1, P2c shapes (d 128), timed alike"
    timeout 900 "${tenv[@]}" python3 $C/torch_gpu.py bench > "$out/torch-bench.log" 2>&1 || status=1
    grep -E '^(device|\||check|[0-9]+ failed)|Error|error' "$out/torch-bench.log" || true
    fi
    if [[ $steps == *,host,* ]]; then
    echo "== torch: where a call's host time goes (not default: MERCURY_GPU_TORCH=host)"
    timeout 300 "${tenv[@]}" python3 $C/torch_gpu.py host > "$out/torch-host.log" 2>&1 || status=1
    grep -E '^(device|\|)|Error|error' "$out/torch-host.log" || true
    fi
  fi
fi

# ==== PyTorch baselines on every GPU (scripts/baselines; issue 13's side-by-side suite) ========
if [[ ",$parts," == *",baselines,"* ]]; then
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( ngpu < 2 )); then
  echo "== baselines: skipped, only ${ngpu} GPU present (they run one process per GPU)"
else
  for script in ${MERCURY_BASELINE_SCRIPTS:-attention gemm mlp}; do
    # The MLP is tensor parallel over 2 GPUs (the examples' mesh), whatever the machine has.
    nproc=$ngpu; [[ $script == mlp ]] && nproc=2
    echo "== torchrun $nproc x scripts/baselines/$script.py ${MERCURY_BASELINE_ARGS:-}"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout 400 torchrun --standalone --nproc_per_node="$nproc" scripts/baselines/$script.py \
      ${MERCURY_BASELINE_ARGS:-} --json-out "$out/$script-baselines.json" \
      > "$out/$script-baselines.md" 2> "$out/$script-baselines.log" || { echo "   $script baselines failed"; tail -5 "$out/$script-baselines.log"; }
    cat "$out/$script-baselines.md"
  done
fi
fi
if [[ -s "$out/suite-ours.tsv" ]]; then
  echo
  echo "== side by side (ours on $(nvidia-smi -L | grep -c '^GPU') GPUs vs the PyTorch baselines; ratio > 1: ours faster)"
  python3 scripts/suite_table.py --ours "$out/suite-ours.tsv" \
    --baselines "$out/attention-baselines.json" --baselines "$out/gemm-baselines.json" \
    --baselines "$out/mlp-baselines.json" | tee "$out/suite-table.md"
fi
exit $status
