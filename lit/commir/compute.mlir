// The compute ops print to a fixed point in custom and generic form, upstream mlir-opt 22
// accepts the generic form through the IRDL definition, and their rules are enforced with
// located errors.
// RUN: %mercury-opt %s --split-input-file | FileCheck %s
// RUN: %mercury-opt %s --split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: %mercury-opt %s --split-input-file --mlir-print-op-generic -o %t.generic
// RUN: %mercury-opt %t.generic --split-input-file | FileCheck %s
// RUN: %mercury-opt %s --split-input-file --mlir-print-op-generic | %mlir-opt --split-input-file --irdl-file=%repo/dialects/commir/commir.irdl.mlir -o /dev/null
// RUN: %mercury-opt --split-input-file --verify-diagnostics %S/Inputs/compute-invalid.mlir

commir.mesh @mesh shape [2]
commir.kernel @ops on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.axis @d = 4 managed
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @AT : [@d, @i] f32 in
  commir.buffer @B : [@j, @d] f32 in
  commir.buffer @C : [@i, @j] bf16 temp
  commir.buffer @Y : [@i] f32 out
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %b = commir.load @B[@j, @d] : !commir.tile<f32>
  %at = commir.load @AT[@d, @i] : !commir.tile<f32>
  %s = commir.matmul %a, %b transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.matmul %at, %b transpose_a transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %u = commir.scale %s by -2.5e-1 : !commir.tile<f32>
  %v = commir.mask causal %u : !commir.tile<f32>
  %m = commir.row_reduce max %v : !commir.tile<f32>
  %w = commir.binary sub %v, %m : !commir.tile<f32>
  %x = commir.unary silu %w : !commir.tile<f32>
  %y = commir.binary max %x, %t : !commir.tile<f32>
  %z = commir.unary gelu %y : !commir.tile<f32>
  %c = commir.cast %z : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %c into @C[@i, @j] : !commir.tile<bf16>
  %r = commir.row_reduce sum %y : !commir.tile<f32>
  commir.reduce add %r into @Y[@i] : !commir.tile<f32>
}

// CHECK-LABEL: commir.kernel @ops on @mesh {
// CHECK:   %s = commir.matmul %a, %b transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
// CHECK:   %t = commir.matmul %at, %b transpose_a transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
// CHECK:   %u = commir.scale %s by -0.25 : !commir.tile<f32>
// CHECK:   %v = commir.mask causal %u : !commir.tile<f32>
// CHECK:   %m = commir.row_reduce max %v : !commir.tile<f32>
// CHECK:   %w = commir.binary sub %v, %m : !commir.tile<f32>
// CHECK:   %x = commir.unary silu %w : !commir.tile<f32>
// CHECK:   %y = commir.binary max %x, %t : !commir.tile<f32>
// CHECK:   %z = commir.unary gelu %y : !commir.tile<f32>
// CHECK:   %c = commir.cast %z : !commir.tile<f32> to !commir.tile<bf16>
// CHECK:   %r = commir.row_reduce sum %y : !commir.tile<f32>

// GENERIC: "commir.matmul"(%a, %b) {transpose_b} : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.scale"(%s) {factor = -0.25} : (!commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.mask"(%u) {kind = "causal"} : (!commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.row_reduce"(%v) {kind = "max"} : (!commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.binary"(%v, %m) {kind = "sub"} : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.cast"(%z) : (!commir.tile<f32>) -> !commir.tile<bf16>

// -----

// Floats with an exponent print with a '.' before it, which upstream mlir-opt needs (it read
// `factor = 1e-5` as an error: "expected '}' in attribute dictionary"; ninth new-user pass).
commir.mesh @small shape [2] bandwidth [1.0e25]
commir.kernel @tiny on @small {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @Y : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  %b = commir.scale %a by 1.0e-5 : !commir.tile<f32>
  commir.store %b into @Y[@i] : !commir.tile<f32>
}
// CHECK-LABEL: commir.mesh @small shape [2] bandwidth [1.0e25]
// CHECK:   %b = commir.scale %a by 1.0e-5 : !commir.tile<f32>
// GENERIC: "commir.scale"(%a) {factor = 1.0e-5} : (!commir.tile<f32>) -> !commir.tile<f32>
