#!/usr/bin/env bash
# The main job: build the tools (release), then let mercury-opt apply the shift-shard schedule
# (RingAttention-style: parallelize the sequence over the mesh, shift and shard K/V) to the
# attention example and print the transformed CommIR with its communication plan and memory.
# On a machine with an NVIDIA GPU the result is then run with mercury-run.
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
  # Ranks = the product of the mesh shape; fewer GPUs than ranks run as virtual ranks on one.
  shape=$(grep -o 'commir.mesh @[A-Za-z0-9_]* shape \[[0-9, ]*\]' "$input" | head -1 | sed 's/.*\[//; s/\]//')
  ranks=1
  for n in ${shape//,/ }; do ranks=$((ranks * n)); done
  # The GPU backend runs several ranks as virtual ranks on one GPU (peer/NCCL transports
  # across GPUs are not built yet); the check compares with the single-device patch.
  flags=(--shift-shard --backend cuda --virtual --check --bench)
  printf '\n== %s GPU(s), %s ranks: mercury-run %s %s\n' "$gpus" "$ranks" "$input" "${flags[*]}"
  target/release/mercury-run "$input" "${flags[@]}"
else
  printf '\n== no NVIDIA GPU here (nvidia-smi finds none): skipping the mercury-run step\n'
  printf '   (on a GPU machine: target/release/mercury-run %s --shift-shard --backend cuda --virtual --check --bench)\n' "$input"
  printf '\n== the same schedule on the CPU reference executor, at a small shape\n'
  target/release/mercury-run examples/small/attention.mlir --shift-shard --backend cpu --check
fi
