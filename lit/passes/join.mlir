// RUN: %mercury-opt --join="outer=b inner=h" %s | FileCheck %s
// RUN: %mercury-opt --join="outer=b inner=h" --split-input-file --verify-diagnostics %S/Inputs/join-invalid.mlir

commir.mesh @m shape [8]
commir.kernel @attn on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in
  commir.buffer @K : [@b, @h, @j, 4] f32 in
  commir.buffer @V : [@b, @h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// CHECK:     commir.axis @b_h = 16 spatial
// CHECK-NOT: commir.axis @h
// CHECK:     commir.buffer @Q : [@b_h, @i, 4] f32 in
// CHECK:     %q = commir.load @Q[@b_h, @i] : !commir.tile<f32>
