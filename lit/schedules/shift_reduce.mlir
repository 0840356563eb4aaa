// RUN: %mercury-opt --schedule=%repo/examples/schedules/shift_reduce.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s
// Each partial row block of C goes to its owner the stage after it is computed.
// CHECK: //   @C: partial p2p (shift-reduce), 56 ops in 7 stages
// CHECK-NOT: reduce_scatter
// CHECK: commir.for @m0 shift(@k0) {
// CHECK: commir.reduce add %c into @C[(@m0 + @k0) mod 8, @m_t, @n]
