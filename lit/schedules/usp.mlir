// RUN: %mercury-opt --schedule=%repo/examples/schedules/usp.sched --commir-print-comm-plan %repo/examples/attention_2x4.mlir | FileCheck %s
// All-to-all inside each node, ring between the two nodes.
// CHECK-DAG: //   @K: all_to_all, 8 ops in 1 stages
// CHECK-DAG: //   @K: ring p2p, 8 ops in 1 stages, {{.*}}, levels [0]
// CHECK-DAG: //   @O: all_to_all
// CHECK: commir.for @h1 parallel(1) {
// CHECK-NEXT: commir.for @i0 parallel(0) {
// CHECK-NEXT: commir.for @j0 shift(@i0) {
