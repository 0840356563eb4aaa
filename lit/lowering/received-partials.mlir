// Received shift-reduce partials as the owner's gemm operand (lowering/conversion/src/partials.rs).
// With examples/schedules/mlp_ag_rs.sched the peer's partial Y block arrives before the rank's
// own GEMM for those rows, which accumulates straight onto it: no f32 accumulator, no combine,
// and the output is delivered from the received slot.
// RUN: %mercury-opt %s --schedule %repo/examples/schedules/mlp_ag_rs.sched --emit=plan | FileCheck %s --check-prefix=FOLD
// With shift_reduce on 2 GPUs the partial arrives after the own GEMM: the combine stays.
// RUN: %mercury-opt %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=k0 offset=1})' --emit=plan | FileCheck %s --check-prefix=KEEP
// Both agree with the unscheduled operator on the CPU executor.
// RUN: %if mercury-run %{ %mercury-run %s --schedule %repo/examples/schedules/mlp_ag_rs.sched --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN-CHECK: check @Y: relative error {{.*}} ok

// FOLD-NOT:  "op": "combine"
// FOLD-NOT:  "name": "Y.acc"
// FOLD:      "name": "Y.partial0.0"
// FOLD:      "accumulate": true
// FOLD:      "outputs": [
// FOLD:      "slot": [[P:[0-9]+]],
// FOLD:      "buffer": 3,
// FOLD:      "src": {
// FOLD-NEXT: "slot": [[P]],
// FOLD-NOT:  "op": "combine"

// KEEP: "name": "C.acc"
// KEEP: "op": "combine"

commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @mlp on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @d = 32 managed
  commir.axis @f = 48 managed
  commir.axis @e = 32 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [S(0), R]
  commir.buffer @W1 : [@d, @f] bf16 in sharding [R, S(0)]
  commir.buffer @H : [@m, @f] bf16 temp
  commir.buffer @W2 : [@f, @e] bf16 in sharding [S(0), R]
  commir.buffer @Y : [@m, @e] bf16 out sharding [S(0), R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w1 = commir.load @W1[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w1 : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %g = commir.unary gelu %a : !commir.tile<f32>
  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %gb into @H[@m, @f] : !commir.tile<bf16>
  %h = commir.load @H[@m, @f] : !commir.tile<bf16>
  %w2 = commir.load @W2[@f, @e] : !commir.tile<bf16>
  %y = commir.matmul %h, %w2 : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %y into @Y[@m, @e] : !commir.tile<f32>
}
