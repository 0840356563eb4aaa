// RUN: %mercury-opt --schedule=%repo/examples/schedules/loongtrain.sched --commir-print-comm-plan %repo/examples/attention_2x4.mlir | FileCheck %s
// Inside a node the pieces rotate every step (level 1, NVLink); across nodes (level 0, RoCE)
// only when the inner ring has gone round.
// CHECK: // comm-plan @attention: mesh [2, 4], 8 ranks, 9 stages
// CHECK: //   @K: ring p2p, 56 ops in 7 stages, {{.*}}, levels [1, 0]
// CHECK: commir.for @j0 shift(@i0) {
// CHECK-NEXT: commir.for @j1 shift(@i1) {
