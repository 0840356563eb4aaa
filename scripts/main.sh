#!/usr/bin/env bash
# The main job: build the tools (release), then let mercury-opt apply the shift-shard schedule
# (RingAttention-style: parallelize the sequence over the mesh, shift and shard K/V) to the
# attention example and print the transformed CommIR with its communication plan and memory.
# On a machine with NVIDIA GPUs the result is then run with mercury-run, checked and timed side
# by side with the single-GPU patch: a rank per GPU when there are several GPUs (the example's
# mesh set to the number of GPUs used), as virtual ranks on one GPU otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

printf '\n== cargo build --release -p mercury-opt -p mercury-run\n'
cargo build --release -p mercury-opt -p mercury-run

out=target/main
mkdir -p "$out"
input=examples/attention.mlir
printf '\n== mercury-opt --shift-shard %s\n' "$input"
target/release/mercury-opt --shift-shard "$input" -o "$out/attention.shift-shard.mlir"
target/release/mercury-opt --commir-print-comm-plan --commir-print-memory "$out/attention.shift-shard.mlir"
printf '(written to %s)\n' "$out/attention.shift-shard.mlir"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU' || true)
  # Ranks = the product of the mesh shape.
  shape=$(grep -o 'commir.mesh @[A-Za-z0-9_]* shape \[[0-9, ]*\]' "$input" | head -1 | sed 's/.*\[//; s/\]//')
  ranks=1
  for n in ${shape//,/ }; do ranks=$((ranks * n)); done
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  if (( gpus >= 2 )); then
    # A rank per GPU: with fewer GPUs than the example's ranks, its mesh is set to 4 or 2 ranks
    # (as scripts/gpu.sh's multi-GPU section does; the 32K sequence divides by each), and
    # shift-shard schedules the ring over that mesh.
    if (( gpus >= ranks )); then nr=$ranks; elif (( gpus >= 4 )); then nr=4; else nr=2; fi
    run_input="$out/attention.${nr}ranks.mlir"
    sed "s/shape \[$shape\]/shape [$nr]/" "$input" > "$run_input"
    flags=(--shift-shard --backend cuda --devices "$nr" --check --bench)
    where="$nr GPUs, a rank per GPU (peer copies between them)"
  else
    # One GPU: the ranks run as virtual ranks on it.
    nr=$ranks
    run_input=$input
    flags=(--shift-shard --backend cuda --virtual --check --bench)
    where="1 GPU, $ranks virtual ranks"
  fi
  printf '\n== %s GPU(s): %s: mercury-run %s %s\n' "$gpus" "$where" "$run_input" "${flags[*]}"
  target/release/mercury-run "$run_input" "${flags[@]}" | tee "$out/run.log"
  sched=$(grep '^| schedule,' "$out/run.log" | awk -F'|' '{print $3}' | xargs || true)
  single=$(grep '^| single-device' "$out/run.log" | awk -F'|' '{print $3}' | xargs || true)
  ratio=$(grep '^| schedule / single' "$out/run.log" | awk -F'|' '{print $3}' | xargs || true)
  printf '\n== side by side: shift-shard ring attention, %s: %s ms vs the single-GPU patch %s ms (schedule / single = %s)\n' \
    "$where" "${sched:--}" "${single:--}" "${ratio:--}"
else
  printf '\n== no NVIDIA GPU here (nvidia-smi finds none): skipping the mercury-run step\n'
  printf '   (on a GPU machine: a rank per GPU, e.g. target/release/mercury-run %s --shift-shard --backend cuda --devices 8 --check --bench;\n' "$input"
  printf '    with one GPU: --virtual instead of --devices 8)\n'
  printf '\n== the same schedule on the CPU reference executor, at a small shape\n'
  target/release/mercury-run examples/small/attention.mlir --shift-shard --backend cpu --check
fi
