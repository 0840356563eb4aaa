// The loops `tile` creates carry the location of what they were made from: a new loop over
// the outer axis that of the tiled axis's declaration, the inner loop of a tiled loop that
// of the loop. A later pass refusing such a loop points there; it used to point at
// `commir.kernel` for a new loop.
// RUN: rm -rf %t && split-file %s %t
// RUN: %mercury-opt %t/new-loop.mlir --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},parallelize{axis=i0 level=0})'
// RUN: %mercury-opt %t/shifted.mlir --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t},parallelize{axis=i0 level=0},tile{axis=j factor=2 outer=j0 inner=j_t},shift{axis=j0 by=i0})'
// RUN: %mercury-opt %t/tiled-loop.mlir --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},parallelize{axis=i_t level=0})'
// The same with the source line and caret, as printed:
// RUN: not %mercury-opt %t/new-loop.mlir \
// RUN:   --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},parallelize{axis=i0 level=0})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PRINTED
// PRINTED: new-loop.mlir:4:3: error: parallelize: the loop over '@i0' has 2 iterations but mesh level 0 has 4 devices (tile it by 4 first)
// PRINTED-NEXT: {{^  commir.axis @i = 64 spatial$}}
// PRINTED-NEXT: {{^  \^$}}
// PRINTED-NOT: commir.kernel

//--- new-loop.mlir
commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{parallelize: the loop over '@i0' has 2 iterations but mesh level 0 has 4 devices (tile it by 4 first)}}
  commir.axis @i = 64 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}

//--- shifted.mlir
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  // expected-error@+1 {{shift: '@j0' has 2 steps but '@i0' spreads over 4 ranks; tile it to 4 first}}
  commir.axis @j = 16 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

//--- tiled-loop.mlir
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  // expected-error@+1 {{parallelize: the loop over '@i_t' has 32 iterations but mesh level 0 has 4 devices (tile it by 4 first)}}
  commir.for @i {
    %a = commir.load @A[@i] : !commir.tile<f32>
    commir.store %a into @C[@i] : !commir.tile<f32>
  }
}
