// A matmul whose `a` has some but fewer batch dimensions than `b` is refused, located: only
// an `a` with no batch dimension (rows times per-head weights) is broadcast over `b`'s.
// Tiling every axis of the naive backward to one element leaves such a pair; read as a
// broadcast it lowered and then failed in the executor ("combine operands differ in size";
// the schedules fuzz target, seeds 34274 and 87084).
// REQUIRES: mercury-run
// RUN: not %mercury-run --backend cpu %S/Inputs/attention-bwd-naive-f32.mlir --pass-pipeline='builtin.module(tile{axis=hk factor=2 outer=hk_o inner=hk_i},tile{axis=j factor=8 outer=j_o inner=j_i},tile{axis=i factor=8 outer=i_o inner=i_i},replicate{buffer=V})' --check 2>&1 | FileCheck %s
// CHECK: attention-bwd-naive-f32.mlir:{{[0-9]+}}:{{[0-9]+}}: error: matmul: b [2, 1] has more batch dimensions than a [2]
// CHECK-NOT: differ in size
