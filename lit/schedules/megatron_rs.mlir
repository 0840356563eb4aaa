// RUN: %mercury-opt --schedule=%repo/examples/schedules/megatron_rs.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s
// CHECK: //   @C: reduce_scatter(add), 8 ops in 1 stages
// CHECK: commir.for @k0 parallel(0) {
