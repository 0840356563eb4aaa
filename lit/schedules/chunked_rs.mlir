// RUN: %mercury-opt --schedule=%repo/examples/schedules/chunked_rs.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s
// Each of the 8 row tiles of C is one GPU's block: its partial sums are reduced to that GPU
// alone, a reduce per tile on every GPU (lit/lowering/reduce-to-owner.mlir has the details).
// CHECK: // comm-plan @gemm_rs: mesh [8], 8 ranks, 10 stages
// CHECK: //   @C: reduce(add), 64 ops in 8 stages, 896.0 MiB sent in total
// CHECK-NOT: all_reduce
// CHECK: commir.for @k0 parallel(0) {
// CHECK-NEXT: commir.for @m0 {
