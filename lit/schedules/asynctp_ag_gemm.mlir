// RUN: %mercury-opt --schedule=%repo/examples/schedules/asynctp_ag_gemm.sched --commir-print-comm-plan %repo/examples/ag_gemm.mlir | FileCheck %s
// The row blocks of A travel around the ring instead of an all-gather before the GEMM.
// CHECK: //   @A: ring p2p, 56 ops in 7 stages
// CHECK-NOT: all_gather
// CHECK: commir.for @n0 parallel(0) {
// CHECK-NEXT: commir.for @m0 shift(@n0) {
