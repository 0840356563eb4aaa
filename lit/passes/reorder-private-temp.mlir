// A scratch temp that every iteration stores and then loads back with the same indices is
// private to the iteration: its dependence is "carried" by both loops only because its indices
// name neither, and no order of the iterations reverses it. reorder accepts it, as shift and
// parallelize do (deps::private_to; it was refused as "interchange could reverse it").
// A temp read before it is written in the iteration is still refused
// (Inputs/reorder-invalid.mlir).
// RUN: %mercury-opt --reorder="outer=i inner=j" %s | FileCheck %s
// RUN: %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(reorder{outer=i inner=j})' 2>&1 | FileCheck %s --check-prefix=EXEC
// CHECK:      commir.for @j {
// CHECK-NEXT:   commir.for @i {
// CHECK-NEXT:     %q = commir.load @Q[@i, @d]
// CHECK:          commir.store %e into @T[@one, @d]
// CHECK-NEXT:     %t = commir.load @T[@one, @d]
// EXEC: check @C: relative error {{.*}} ok
commir.mesh @m shape [1]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.axis @d = 4 spatial
  commir.axis @one = 1 spatial
  commir.buffer @Q : [@i, @d] f32 in
  commir.buffer @K : [@j, @d] f32 in
  commir.buffer @T : [@one, @d] f32 temp
  commir.buffer @C : [@i, @d] f32 out
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
