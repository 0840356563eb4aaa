// RUN: %mercury-opt --shift-shard %repo/examples/attention.mlir | FileCheck %s --check-prefix=RING
// RUN: %mercury-opt --shift-shard --commir-print-comm-plan %repo/examples/attention.mlir | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-opt --shift-shard %repo/examples/attention_2x4.mlir | FileCheck %s --check-prefix=TWO
// RUN: not %mercury-opt --shift-shard %s 2>&1 | FileCheck %s --check-prefix=ERR

// RING:      commir.for @i0 parallel(0) {
// RING-NEXT:   commir.for @j0 shift(@i0) {
// RING-NEXT:     %q = commir.load @Q[@b, @h, @i0, @i_t] : !commir.tile<bf16>
// RING-NEXT:     %k = commir.load @K[@b, @h, (@j0 + @i0) mod 8, @j_t] : !commir.tile<bf16>
// RING-NEXT:     %v = commir.load @V[@b, @h, (@j0 + @i0) mod 8, @j_t] : !commir.tile<bf16>

// RingAttention on 8 GPUs: 7 steps in which every GPU passes its 32 MiB of K and of V on.
// PLAN: // comm-plan @attention: mesh [8], 8 ranks, 9 stages
// PLAN: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// PLAN: //   @V: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]

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
