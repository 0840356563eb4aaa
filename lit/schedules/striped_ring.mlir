// RUN: %mercury-opt --schedule=%repo/examples/schedules/striped_ring.sched --commir-print-comm-plan %repo/examples/attention_causal.mlir | FileCheck %s
// RUN: not %mercury-opt --schedule=%repo/examples/schedules/striped_ring.sched --emit=plan %repo/examples/attention_2m.mlir 2>&1 | FileCheck %s --check-prefix=RUNS

// Blocks of 128 positions round robin over 8 GPUs: 32 blocks per GPU; the causal work is the
// same on every GPU up to one block per step.
// CHECK: // comm-plan @attention: mesh [8], 8 ranks, 12 stages
// CHECK: //   @K: permute p2p (reshard), 224 ops in 1 stages, 224.0 MiB sent in total, levels [0]
// CHECK: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// CHECK: //   @Q: placed [R, R, S(striped(0, 128)), R], declared [R, R, S(0), R] (moved at the start)
// CHECK: //   causal attention work: busiest rank 1.03x the mean, 1.06x in the worst stage

// At 2M positions the same block would give every GPU 2048 runs to move.
// RUNS: error: '@Q' placed [R, R, S(striped(0, 128)), R] gives a rank 2048 runs of positions in dimension 2; the lowering moves at most 512 (use a larger striped block)
