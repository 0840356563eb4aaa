// RUN: %mercury-opt --single-device %s | FileCheck %s --check-prefix=ONE
// RUN: %mercury-opt --reshape-mesh=shape=2x4 %s | FileCheck %s --check-prefix=TWO
// RUN: not %mercury-opt --reshape-mesh=shape=2x0 %s 2>&1 | FileCheck %s --check-prefix=BAD
// single-device after a schedule drops the loops' mapping: one device runs every iteration in
// turn (it left a parallel loop over a mesh level of 1 device: "IR invalid after pass").
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=8 outer=i0 inner=i_t},parallelize{axis=i0 level=0},tile{axis=j factor=8 outer=j0 inner=j_t},shift{axis=j0 by=i0},single-device)' %s | FileCheck %s --check-prefix=DROPPED
// DROPPED: commir.mesh @m shape [1]
// DROPPED: commir.for @i0 {
// DROPPED: commir.for @j0 {

commir.mesh @m shape [8] names ["gpu"] bandwidth [450.0]
commir.kernel @ws on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 32 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  commir.reshard @A to [R, S(0)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// One device: a mesh of ones, no placement, no reshard.
// ONE: commir.mesh @m shape [1] names ["gpu"] bandwidth [450.0]
// ONE: commir.buffer @A : [@i, @j] f32 in{{$}}
// ONE: commir.buffer @C : [@i] f32 out{{$}}
// ONE-NOT: commir.reshard

// Two levels: sharded dimensions are sharded over both; names and bandwidths are dropped.
// TWO: commir.mesh @m shape [2, 4]{{$}}
// TWO: commir.buffer @A : [@i, @j] f32 in sharding [S(0, 1), R]
// TWO: commir.buffer @B : [@j] f32 in{{$}}
// TWO: commir.buffer @C : [@i] f32 out sharding [S(0, 1)]

// BAD: option 'shape' must be positive sizes joined by 'x', got '2x0'
