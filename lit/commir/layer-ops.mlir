// The compute ops of a decoder layer: rsqrt and add_scalar (RMSNorm), rotate_half (rotary
// embeddings), operands broadcast over leading dimensions (a norm's weight, a rotary table)
// and a matmul whose rows are broadcast over the heads of its right operand (one projection
// matrix per head). They print to a fixed point in custom and generic form, upstream
// mlir-opt reads the generic form through the IRDL definition, the lowering records the
// trailing operands and the rotation in the plan's elementwise programs, the CPU executor
// runs them against the single-device plan with the rotated dimension whole and the rows
// split over 2 GPUs, and the rules are enforced with located errors.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: %mercury-opt %s --mlir-print-op-generic | %mercury-opt | FileCheck %s
// RUN: %mercury-opt %s --mlir-print-op-generic | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir -o /dev/null
// RUN: %mercury-opt %s --emit=plan | FileCheck %s --check-prefix=PLAN
// RUN: %if mercury-run %{ %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},parallelize{axis=i0 level=0})' | FileCheck %s --check-prefix=CPU %}
// RUN: %mercury-opt --split-input-file --verify-diagnostics %S/Inputs/layer-ops-invalid.mlir

commir.mesh @mesh shape [2]
commir.kernel @norm_rope on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @e = 6 managed
  commir.buffer @X : [@i, @e] f32 in sharding [S(0), R]
  commir.buffer @W : [@e] f32 in
  commir.buffer @Wq : [@h, @e, 4] f32 in
  commir.buffer @Cos : [@i, 4] f32 in sharding [S(0), R]
  commir.buffer @Sin : [@i, 4] f32 in sharding [S(0), R]
  commir.buffer @Q : [@h, @i, 4] f32 out sharding [R, S(0), R]
  %x = commir.load @X[@i, @e] : !commir.tile<f32>
  %sq = commir.binary mul %x, %x : !commir.tile<f32>
  %ss = commir.row_reduce sum %sq : !commir.tile<f32>
  %ms = commir.scale %ss by 0.16666666666666666 : !commir.tile<f32>
  %me = commir.add_scalar %ms, 1.0e-5 : !commir.tile<f32>
  %r = commir.unary rsqrt %me : !commir.tile<f32>
  %xr = commir.binary mul %x, %r : !commir.tile<f32>
  %w = commir.load @W[@e] : !commir.tile<f32>
  %xn = commir.binary mul %w, %xr : !commir.tile<f32>
  %wq = commir.load @Wq[@h, @e] : !commir.tile<f32>
  %q = commir.matmul %xn, %wq : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %c = commir.load @Cos[@i] : !commir.tile<f32>
  %s = commir.load @Sin[@i] : !commir.tile<f32>
  %qc = commir.binary mul %q, %c : !commir.tile<f32>
  %qr = commir.rotate_half %q : !commir.tile<f32>
  %qs = commir.binary mul %s, %qr : !commir.tile<f32>
  %qo = commir.binary add %qc, %qs : !commir.tile<f32>
  commir.store %qo into @Q[@h, @i] : !commir.tile<f32>
}

// CHECK-LABEL: commir.kernel @norm_rope on @mesh {
// CHECK:   %me = commir.add_scalar %ms, 1.0e-5 : !commir.tile<f32>
// CHECK:   %r = commir.unary rsqrt %me : !commir.tile<f32>
// CHECK:   %xn = commir.binary mul %w, %xr : !commir.tile<f32>
// CHECK:   %q = commir.matmul %xn, %wq : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
// CHECK:   %qr = commir.rotate_half %q : !commir.tile<f32>

// GENERIC: "commir.add_scalar"(%ms) {value = 1.0e-5} : (!commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.unary"(%me) {kind = "rsqrt"} : (!commir.tile<f32>) -> !commir.tile<f32>
// GENERIC: "commir.rotate_half"(%q) : (!commir.tile<f32>) -> !commir.tile<f32>

// The norm's scale: one program of its row operand; `x * r` and `w * xr` one program whose
// third input, the weight, is a trailing operand; the rotation reads the projection (an
// input) at the other half.
// PLAN: "op": "add_scalar"
// PLAN: "op": "unary"
// PLAN-NEXT: "f": "rsqrt"
// PLAN: "trailing": [
// PLAN-NEXT: 2
// PLAN: "kind": "matmul"
// PLAN: "op": "rotate_half"

// CPU: check @Q: every rank holds its shard as declared ('sharding [R, S(0), R]')  ok
// CPU: check @Q: relative error {{.*}}  ok
