// RUN: %mercury-opt --schedule=%repo/examples/schedules/ring_attention.sched --commir-print-comm-plan=detail=true %repo/examples/attention.mlir | FileCheck %s

// The K and V shards travel around the ring: at every stage each rank receives the piece it
// needs next from its neighbour while it computes on the current one.
// CHECK: // comm-plan @attention: mesh [8], 8 ranks, 9 stages
// CHECK: //   @K: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// CHECK: //   @V: ring p2p, 56 ops in 7 stages, 1.8 GiB sent in total, levels [0]
// CHECK: //   stage 1: rank 0 -> rank 7 @K from K.shard[0:1, 0:32, 0:4096, 0:128] 32.0 MiB (level 0)
// A later stage forwards the tile received before: its region is in that ring slot.
// CHECK: //   stage 2: rank 0 -> rank 7 @K from K.ring0.0[
// CHECK: //   stage 1: rank 1 -> rank 0 @K
// CHECK:      commir.for @i0 parallel(0) {
// CHECK-NEXT:   commir.for @j0 shift(@i0) {
// CHECK:          %k = commir.load @K[@b, @h, (@j0 + @i0) mod 8, @j_t]
