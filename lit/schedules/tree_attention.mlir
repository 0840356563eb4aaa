// RUN: %mercury-opt --schedule=%repo/examples/schedules/tree_attention.sched --commir-print-comm-plan %repo/examples/attention.mlir | FileCheck %s
// CHECK: //   @O: all_reduce(lse_merge), 8 ops in 1 stages
// CHECK: //   @Q: all_gather
// CHECK: commir.for @j0 parallel(0) {
