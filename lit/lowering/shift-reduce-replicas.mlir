// Shift-reduce on a mesh level that no parallel loop uses: ranks (p, 0) and (p, 1) compute
// the same partial, and only the one that matches the owner on that level sends it (found by
// mercury-fuzz, seed 27824: the owner received both copies and the result was twice the sum;
// before that the two copies collided in one receive slot, an internal error).
// RUN: %mercury-opt %s --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=k0},commir-print-comm-plan)' | FileCheck %s
// Two partials travel (one per level-0 rank pair), not four.
// CHECK: @C: partial p2p (shift-reduce), 2 ops in 1 stages, 128 B sent in total, levels [0]
// RUN: %if mercury-run %{ %mercury-run %s --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=k0})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN-CHECK: check @C: relative error {{.*}} ok

commir.mesh @mesh shape [2, 2] names ["l0", "l1"]
commir.kernel @gemm_rs on @mesh {
  commir.axis @m = 8 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 4 spatial
  commir.buffer @A : [@m, @k] f32 in sharding [R, S(0, 1)]
  commir.buffer @B : [@k, @n] f32 in sharding [S(0, 1), R]
  commir.buffer @C : [@m, @n] f32 out sharding [S(0, 1), R]
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
