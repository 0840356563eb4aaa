// A hand-written parallel loop is held to what `parallelize` checks: its iterations run on
// different devices, so none may carry a dependence. Here every iteration of @j stores into
// the same tile of @Y (the last one wins); each rank used to keep its own, exit 0.
// RUN: not %mercury-run %s --backend cpu 2>&1 | FileCheck %s
// CHECK: parallel-race-invalid.mlir:[[# @LINE + 15]]:5: error: the loop over '@j' is parallel over mesh level 0, but this store into '@Y' touches the same tile in different iterations of '@j'
// Once another index pins @b, (@a + @b) mod 2 determines @a: the store meets itself in no two
// iterations, so the loops may be swapped, and the swapped kernel computes the same.
// RUN: %mercury-run %S/Inputs/reorder-pinned.mlir --pass-pipeline='builtin.module(reorder{outer=a inner=b})' --backend cpu --check | FileCheck %s --check-prefix=SWAP
// SWAP: check @Y: relative error {{.*}} ok
commir.mesh @mesh shape [4] names ["gpu"]
commir.kernel @lw on @mesh {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.axis @c = 2 spatial
  commir.buffer @X : [@i, @j, @c] f32 in sharding [R, S(0), R]
  commir.buffer @Y : [@i, @c] f32 out
  commir.for @j parallel(0) {
    %x = commir.load @X[@i, @j, @c] : !commir.tile<f32>
    %r = commir.unary exp %x : !commir.tile<f32>
    commir.store %r into @Y[@i, @c] : !commir.tile<f32>
  }
}
