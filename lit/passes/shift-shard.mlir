// RUN: %mercury-opt --shift-shard %repo/examples/attention.mlir | FileCheck %s --check-prefix=RING
// RUN: %mercury-opt --shift-shard --commir-print-comm-plan %repo/examples/attention.mlir | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-opt --shift-shard %repo/examples/attention_2x4.mlir | FileCheck %s --check-prefix=TWO
// RUN: not %mercury-opt --shift-shard %s 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: %mercury-opt --shift-shard --commir-print-comm-plan %repo/examples/attention_causal.mlir | FileCheck %s --check-prefix=CAUSAL
// RUN: %mercury-opt --shift-shard=balance=false --commir-print-comm-plan %repo/examples/attention_causal.mlir | FileCheck %s --check-prefix=UNBALANCED
// RUN: %mercury-opt --shift-shard --commir-print-comm-plan %repo/examples/attention_causal_zigzag.mlir | FileCheck %s --check-prefix=DECLARED
// A GEMM whose product goes through GeLU / SiLU before it is stored: its K cannot travel
// around a ring (gelu of a partial sum is not a partial result); shift-shard distributes M and
// leaves B whole on every rank. It was refused, naming a loop '@k0' the user never wrote.
// RUN: %mercury-run %S/Inputs/shift-shard-epilogue.mlir --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EPI
// EPI-NOT: @B: ring
// EPI: check @D: relative error {{.*}} ok

// RING:      commir.for @i0 parallel(0) {
// RING-NEXT:   commir.for @j0 shift(@i0) {
// RING-NEXT:     %q = commir.load @Q[@b, @h, @i0, @i_t] : !commir.tile<bf16>
// RING-NEXT:     %k = commir.load @K[@b, @h, (@j0 + @i0) mod 8, @j_t] : !commir.tile<bf16>
// RING-NEXT:     %v = commir.load @V[@b, @h, (@j0 + @i0) mod 8, @j_t] : !commir.tile<bf16>

// RingAttention on 8 GPUs: 7 steps in which every GPU passes its 32 MiB of K and of V on.
// PLAN: // comm-plan @attention: mesh [8], 8 ranks, 9 stages
// PLAN: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// PLAN: //   @V: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]

// Causal attention: shift-shard places the query and key positions zigzag (head-tail) so that
// every GPU does the same work at every step; the operator declares them contiguous, so they
// are permuted point to point at the start and the output back at the end.
// CAUSAL: // comm-plan @attention: mesh [8], 8 ranks, 12 stages
// CAUSAL: //   @K: permute p2p (reshard), 14 ops in 1 stages, 224.0 MiB sent in total, levels [0]
// CAUSAL: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// CAUSAL: //   @Q: permute p2p (reshard), 14 ops in 1 stages
// CAUSAL: //   @Q: placed [R, R, S(zigzag(0)), R], declared [R, R, S(0), R] (moved at the start)
// CAUSAL: //   @O: placed [R, R, S(zigzag(0)), R], declared [R, R, S(0), R], ends [R, R, S(0), R] (permuted at the end)
// CAUSAL: //   causal attention work: busiest rank 1.00x the mean, 1.00x in the worst stage
// CAUSAL: commir.reshard @Q to [R, R, S(zigzag(0)), R]
// CAUSAL: commir.reshard @O to [R, R, S(zigzag(0)), R]
// CAUSAL: commir.reshard @O to [R, R, S(0), R]

// Without load balancing the contiguous ring leaves GPU 0 idle after its first step while GPU
// 7 works at every step.
// UNBALANCED: //   @K: ring p2p, 56 ops in 7 stages
// UNBALANCED-NOT: placed
// UNBALANCED: //   causal attention work: busiest rank 1.87x the mean, 8.00x in the worst stage

// An operator declared in zigzag placement needs no permutation.
// DECLARED: // comm-plan @attention: mesh [8], 8 ranks, 9 stages
// DECLARED-NOT: permute
// DECLARED: //   @K: ring p2p, 56 ops in 7 stages
// DECLARED: //   @Q: placed [R, R, S(zigzag(0)), R]
// DECLARED-NEXT: //   @K: placed
// DECLARED: //   causal attention work: busiest rank 1.00x the mean, 1.00x in the worst stage

// Two-level shift (LoongTrain): rings inside the node every step, across nodes every 4 steps.
// TWO:      commir.for @i0 parallel(0) {
// TWO-NEXT:   commir.for @i1 parallel(1) {
// TWO-NEXT:     commir.for @j0 shift(@i0) {
// TWO-NEXT:       commir.for @j1 shift(@i1) {
// TWO:              %k = commir.load @K[@b, @h, (@j0 + @i0) mod 2, (@j1 + @i1) mod 4, @j_t]

commir.mesh @m shape [3]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}
// ERR: error: shift-shard: no spatial axis of the output divides over the 3 devices of '@m'
