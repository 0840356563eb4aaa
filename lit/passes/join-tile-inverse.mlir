// REQUIRES: mercury-run
// `tile` of an axis without a loop leaves a loop over the outer axis around whole inner tiles;
// `join` of the two removes that loop again: the exact inverse, names aside. It was refused
// ("must be perfectly nested"). Accepted when no dependence crosses the loop's iterations
// (reductions of one kind commute: the managed @j too); a reduction read back in the loop is
// refused (Inputs/join-tile-inverse-invalid.mlir).
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t}, join{outer=i0 inner=i_t name=i})' %s | FileCheck %s
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=j_t}, join{outer=j0 inner=j_t name=j})' %s | FileCheck %s
// RUN: %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=j_t}, join{outer=j0 inner=j_t}, tile{axis=i factor=2 outer=i0 inner=i_t}, join{outer=i0 inner=i_t})' | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-opt --join="outer=a0 inner=a_t" --verify-diagnostics %S/Inputs/join-tile-inverse-invalid.mlir
// CHECK-NOT:  commir.for
// CHECK:      commir.axis @i = 64 spatial
// CHECK-NEXT: commir.axis @j = 64 managed
// CHECK-NOT:  commir.for
// CHECK:      %q = commir.load @Q[@b, @h, @i]
// CHECK-NOT:  commir.for
// CHECK:      commir.reduce lse_merge %o, %lse into @O[@b, @h, @i]
// EXEC: check @O: relative error {{.*}} ok
commir.mesh @m shape [2]
commir.kernel @attention on @m {
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @h, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 8] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
