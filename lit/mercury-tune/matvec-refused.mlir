// examples/weighted_sum.mlir (a matrix-vector product: a GEMM patch whose second operand is
// 1-D) is refused at that operand's declaration, saying which layout the generator's GEMM
// schedules are written for (new-user pass 5b: "'@B' has no axis in dimension 1", unlocated).
// REQUIRES: mercury-tune
// RUN: %exit-status %mercury-tune %S/../../examples/weighted_sum.mlir --topology h100-1x4 \
// RUN:   --out %t 2>&1 | FileCheck %s --match-full-lines --strict-whitespace
// CHECK:{{[^ ]*}}weighted_sum.mlir:9:3: error: mercury-tune cannot generate the schedules of '@weighted_sum': '@B' has 1 dimension(s), no dimension 1; its gemm schedules are written for a GEMM's operands as A[m, k] and B[k, n] (2-D each; a matrix-vector product, B[k], is not one of them). Write the schedule by hand (a schedule script for mercury-run --schedule), or use mercury-run --shift-shard
// CHECK-NEXT:  commir.buffer @B : [@j] f32 in
// CHECK-NEXT:  ^
// CHECK-NEXT:exit status 1
