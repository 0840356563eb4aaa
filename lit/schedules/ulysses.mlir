// RUN: %mercury-opt --schedule=%repo/examples/schedules/ulysses.sched --commir-print-comm-plan %repo/examples/attention.mlir | FileCheck %s
// CHECK-DAG: //   @Q: all_to_all, 8 ops in 1 stages
// CHECK-DAG: //   @K: all_to_all, 8 ops in 1 stages
// CHECK-DAG: //   @V: all_to_all, 8 ops in 1 stages
// CHECK-DAG: //   @O: all_to_all, 8 ops in 1 stages
// CHECK: commir.reshard @Q to [R, S(0), R, R]
// CHECK: commir.for @h0 parallel(0) {
// CHECK: commir.reshard @O to [R, R, S(0), R]
