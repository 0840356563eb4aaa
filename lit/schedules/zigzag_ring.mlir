// RUN: %mercury-opt --schedule=%repo/examples/schedules/zigzag_ring.sched --commir-print-comm-plan %repo/examples/attention_causal.mlir | FileCheck %s
// RUN: %mercury-opt --schedule=%repo/examples/schedules/ring_attention.sched --commir-print-comm-plan=detail=true %repo/examples/attention_causal_zigzag.mlir | FileCheck %s --check-prefix=DECLARED
// RUN: %mercury-opt --schedule=%repo/examples/schedules/zigzag_ring.sched --emit=plan %repo/examples/attention_causal.mlir | %python -c "import json,sys; p=json.load(sys.stdin); print(sorted({sum(1 for op in st['compute'] if op['op'] == 'patch') for r in p['ranks'] for st in r['stages'][2:10]}))" | FileCheck %s --check-prefix=PATCHES

// The contiguous shards move to zigzag in one point-to-point stage, K and V go around the
// ring of 8 in 7 transfer stages, O goes back to contiguous at the end (cast to bf16 on its
// holder in one stage, 224 MiB sent in the next); every GPU does the same causal work at
// every step.
// CHECK: // comm-plan @attention: mesh [8], 8 ranks, 12 stages
// CHECK: //   @K: permute p2p (reshard), 14 ops in 1 stages, 224.0 MiB sent in total, levels [0]
// CHECK: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// CHECK: //   @O: p2p (output delivery), 14 ops in 1 stages, 224.0 MiB sent in total
// CHECK: //   @Q: permute p2p (reshard), 14 ops in 1 stages
// CHECK: //   @V: ring p2p, 56 ops in 7 stages
// CHECK: //   causal attention work: busiest rank 1.00x the mean, 1.00x in the worst stage
// CHECK: commir.reshard @Q to [R, R, S(zigzag(0)), R]
// CHECK: commir.for @i0 parallel(0) {
// CHECK-NEXT: commir.for @j0 shift(@i0) {
// CHECK: commir.reshard @O to [R, R, S(0), R]

// Declared zigzag: no permutation; rank 0 holds positions 0-2047 and 30720-32767 and passes
// them on as one transfer of 4096 rows per step.
// DECLARED: // comm-plan @attention: mesh [8], 8 ranks, 9 stages
// DECLARED-NOT: permute
// DECLARED: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// DECLARED: //   stage 1: rank 0 -> rank 7 @K from K.shard[0:1, 0:32, 0:4096, 0:128] 32.0 MiB (level 0)

// One attention patch per rank and ring step.
// PATCHES: [1]
