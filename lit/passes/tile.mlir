// RUN: %mercury-opt --tile="axis=i factor=4" %s | FileCheck %s

commir.mesh @m shape [4]
commir.kernel @ws on @m {
  commir.axis @i = 64 spatial min 8
  commir.axis @j = 32 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// CHECK:      commir.axis @i_o = 4 spatial
// CHECK-NEXT: commir.axis @i_i = 16 spatial min 8
// CHECK:      commir.buffer @A : [@i_o * @i_i, @j] f32 in
// CHECK:      commir.buffer @C : [@i_o * @i_i] f32 out
// CHECK:      commir.for @i_o {
// CHECK-NEXT:   %a = commir.load @A[@i_o, @i_i, @j] : !commir.tile<f32>
// CHECK-NEXT:   %b = commir.load @B[@j] : !commir.tile<f32>
// CHECK:        commir.reduce add %c into @C[@i_o, @i_i] : !commir.tile<f32>
// CHECK-NEXT: }
