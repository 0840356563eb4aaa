// RUN: %mercury-opt --schedule=%repo/examples/schedules/shift_reduce_halves.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s
// Shift-reduce in half blocks: 16 half blocks per rank, each partial half sent to its owner
// the stage after it is computed; the own block's halves come last.
// CHECK: // comm-plan @gemm_rs: mesh [8], 8 ranks, 17 stages
// CHECK: //   @C: partial p2p (shift-reduce), 112 ops in 14 stages
// CHECK-NOT: reduce_scatter
// CHECK: commir.for @m0 shift(@k0) {
// CHECK-NEXT: commir.for @m1 {
//
// On 2 GPUs the own block's GEMMs accumulate onto the peer's partial halves, received the
// stage before, in place in their bf16 receive slots: no f32 accumulator, no combine.
// RUN: %mercury-opt %S/../lowering/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},tile{axis=m_t factor=2 outer=m1 inner=m_u},shift{axis=m0 by=k0 offset=1})' --emit=plan | FileCheck %s --check-prefix=TWO
// TWO:     "rank": 0,
// TWO-NOT: "combine"
// TWO-NOT: "C.acc"
// TWO:     "accumulate": true
// TWO:     "rank": 1,
