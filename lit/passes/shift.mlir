// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0})' %s | FileCheck %s
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0 offset=1})' %s | FileCheck %s --check-prefix=OFFSET
// With offset=1 rank p starts one piece further on.
// OFFSET: commir.load @B[(@j0 + @i0 + 1) mod 4, @j_t]

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

// Every access in the loop gets the staggered index; shifting alone moves no data (B stays
// replicated until it is sharded).
// CHECK:      commir.for @i0 parallel(0) {
// CHECK-NEXT:   commir.for @j0 shift(@i0) {
// CHECK-NEXT:     %a = commir.load @A[@i0, @i_t, (@j0 + @i0) mod 4, @j_t] : !commir.tile<f32>
// CHECK-NEXT:     %b = commir.load @B[(@j0 + @i0) mod 4, @j_t] : !commir.tile<f32>
