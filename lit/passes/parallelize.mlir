// RUN: %mercury-opt --tile="axis=i factor=4" --parallelize="axis=i_o level=0" %s | FileCheck %s

commir.mesh @m shape [4]
commir.kernel @ws on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 32 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// Inputs indexed by the distributed axis become sharded over the level; B stays replicated.
// The output keeps its declared placement (replicated): its rows are delivered at the end.
// CHECK: commir.buffer @A : [@i_o * @i_i, @j] f32 in sharding [S(0), R]
// CHECK: commir.buffer @B : [@j] f32 in
// CHECK: commir.buffer @C : [@i_o * @i_i] f32 out{{$}}
// CHECK: commir.for @i_o parallel(0) {
