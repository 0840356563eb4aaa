// Bodies that reduce into the same output tile twice.
// Shift-reduce: each reduction's partial travels to the owner in its own slot (they used to
// share one: "two transfers write slot 'B.partial0.0'"), for every offset.
// RUN: %mercury-opt %s --pass-pipeline='builtin.module(tile{axis=f factor=2 outer=f0 inner=f_t},parallelize{axis=f0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=f0 offset=1})' --emit=plan | FileCheck %s
// CHECK: "name": "B.partial0.0"
// CHECK: "name": "B.partial0_1.0"
// RUN: %if mercury-run %{ %mercury-run %s --pass-pipeline='builtin.module(tile{axis=f factor=2 outer=f0 inner=f_t},parallelize{axis=f0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=f0})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN: %if mercury-run %{ %mercury-run %s --pass-pipeline='builtin.module(tile{axis=f factor=2 outer=f0 inner=f_t},parallelize{axis=f0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=f0 offset=1})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// Pieces that only reduce into @B (one kind: the sums commute) may be distributed, and each
// nest shifted its own way.
// RUN: %if mercury-run %{ %mercury-run %s --pass-pipeline='builtin.module(tile{axis=f factor=2 outer=f0 inner=f_t},parallelize{axis=f0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},distribute{axis=m0},shift{axis=m0 by=f0 nth=0},shift{axis=m0 by=f0 nth=1 offset=1})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN-CHECK: check @B: relative error {{.*}} ok
// An inout buffer is refused (the plan has no in-place buffers).
// RUN: not %mercury-opt %S/Inputs/inout.mlir --emit=plan 2>&1 | FileCheck %s --check-prefix=INOUT
// INOUT: inout.mlir:6:3: error: '@A' is inout: the lowering has no in-place buffers yet; declare an 'in' buffer and an 'out' buffer instead

commir.mesh @mesh shape [2]
commir.kernel @twice on @mesh {
  commir.axis @m = 8 spatial
  commir.axis @f = 4 managed
  commir.axis @c = 4 spatial
  commir.buffer @A : [@m, @c, @f] f32 in
  commir.buffer @D : [@m, @c, @f] f32 in
  commir.buffer @B : [@m, @c] f32 out sharding [S(0), R]
  %a = commir.load @A[@m, @c, @f] : !commir.tile<f32>
  %p = commir.unary exp %a : !commir.tile<f32>
  %ps = commir.row_reduce sum %p : !commir.tile<f32>
  commir.reduce add %ps into @B[@m, @c] : !commir.tile<f32>
  %d = commir.load @D[@m, @c, @f] : !commir.tile<f32>
  %ds = commir.row_reduce sum %d : !commir.tile<f32>
  commir.reduce add %ds into @B[@m, @c] : !commir.tile<f32>
}
