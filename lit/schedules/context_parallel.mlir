// RUN: %mercury-opt --schedule=%repo/examples/schedules/context_parallel.sched --commir-print-comm-plan %repo/examples/attention.mlir | FileCheck %s
// CHECK: //   @K: all_gather, 8 ops in 1 stages
// CHECK: //   @V: all_gather, 8 ops in 1 stages
// CHECK-NOT: @Q: all_gather
// CHECK: commir.for @i0 parallel(0) {
