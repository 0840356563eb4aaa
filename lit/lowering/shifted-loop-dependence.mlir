// A hand-written shifted loop is held to what the shift pass checks: its iterations run in
// another order on each rank, so none of its accesses may carry a dependence (here a store
// every iteration makes to one tile). Accesses of another loop over the same axis (after
// distribute: examples/mlp.mlir's @H, stored in one loop over @m0 and loaded in the next) are
// not reordered by it (lit/schedules/mlp.mlir).
// RUN: %exit-status %mercury-opt --emit=plan %s 2>&1 | FileCheck %s
// CHECK: shifted-loop-dependence.mlir:[[@LINE+12]]:7: error: the loop over '@j' is shifted by '@i', but this store into '@Y' touches the same tile in different iterations of '@j'
// CHECK: exit status 1
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.axis @j = 2 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@j, @c] f32 in
  commir.buffer @Y : [@i, @c] f32 out
  commir.for @i parallel(0) {
    commir.for @j shift(@i) {
      %a = commir.load @A[(@j + @i) mod 2, @c] : !commir.tile<f32>
      commir.store %a into @Y[@i, @c] : !commir.tile<f32>
    }
  }
}
