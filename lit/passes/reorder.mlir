// RUN: %mercury-opt --reorder="outer=a inner=b" %s | FileCheck %s
// RUN: %mercury-opt --reorder="outer=a inner=b" --split-input-file --verify-diagnostics %S/Inputs/reorder-invalid.mlir

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @a = 4 spatial
  commir.axis @b = 4 managed
  commir.buffer @X : [@a, @b] f32 in
  commir.buffer @Y : [@a] f32 out
  commir.for @a {
    commir.for @b {
      %x = commir.load @X[@a, @b] : !commir.tile<f32>
      commir.reduce add %x into @Y[@a] : !commir.tile<f32>
    }
  }
}

// Reductions of one kind commute, so the interchange is legal.
// CHECK:      commir.for @b {
// CHECK-NEXT:   commir.for @a {
// CHECK-NEXT:     %x = commir.load @X[@a, @b]
