// RUN: %mercury-opt --schedule=%repo/examples/schedules/shift_reduce.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s
// Each partial row block of C goes to its owner the stage after it is computed; with offset=1
// each rank's own block comes last, so 10 stages (not 11): the last transfer overlaps the last
// GEMM instead of following it.
// CHECK: // comm-plan @gemm_rs: mesh [8], 8 ranks, 10 stages
// CHECK: //   @C: partial p2p (shift-reduce), 56 ops in 7 stages
// CHECK-NOT: reduce_scatter
// CHECK: commir.for @m0 shift(@k0) {
// CHECK: commir.reduce add %c into @C[(@m0 + @k0 + 1) mod 8, @m_t, @n]
