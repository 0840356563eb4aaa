// A scratch temp (not indexed by the parallel axis) that each iteration stores and loads back is
// private to the iteration: each rank writes and reads its own copy, so parallelize accepts it as
// shift does (deps::private_to; it was refused as a race, new-user pass 2026-12-03).
// RUN: %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t}, parallelize{axis=i0 level=0})' 2>&1 | FileCheck %s
// RUN: %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t}, parallelize{axis=i0 level=0}, tile{axis=j factor=2 outer=j0 inner=j_t}, shift{axis=j0 by=i0})' 2>&1 | FileCheck %s
// CHECK: check @C: relative error {{.*}} ok
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 spatial
  commir.axis @d = 4 spatial
  commir.axis @one = 1 spatial
  commir.buffer @Q : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @K : [@j, @d] f32 in
  commir.buffer @T : [@one, @d] f32 temp
  commir.buffer @C : [@i, @d] f32 out sharding [S(0), R]
  commir.for @i {
    commir.for @j {
      %q = commir.load @Q[@i, @d] : !commir.tile<f32>
      %e = commir.unary exp %q : !commir.tile<f32>
      commir.store %e into @T[@one, @d] : !commir.tile<f32>
      %t = commir.load @T[@one, @d] : !commir.tile<f32>
      %k = commir.load @K[@j, @d] : !commir.tile<f32>
      %s = commir.matmul %t, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      %u = commir.matmul %s, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      commir.reduce add %u into @C[@i, @d] : !commir.tile<f32>
    }
  }
}
