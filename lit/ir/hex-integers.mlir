// Integer literals are decimal or hexadecimal (`0x10`, `-0x10` where a sign is allowed) wherever
// the text holds an integer, as upstream MLIR's lexer reads them: attributes, a result pack's
// count, custom-form integers (arrays, extents, commir dimensions, sharding levels, index
// expressions). They print in decimal, as upstream prints them; a hex literal of a float type is
// its bit pattern. Builtin shapes stay decimal: `tensor<0x10xf32>` is 0 by 10, here and upstream.
// `0x10` was refused ("found '0'"; fourteenth new-user pass, 05-hex-integers).
// RUN: rm -rf %t && split-file --leading-lines %s %t
//
// The generic form: read as upstream reads it, printed in decimal, and our output reads back in
// mlir-opt 22 as the same values.
// RUN: %mercury-opt --allow-unregistered-dialect %t/generic.mlir | FileCheck %s --check-prefix=GENERIC
// RUN: %mlir-opt --allow-unregistered-dialect %t/generic.mlir | FileCheck %s --check-prefix=UPSTREAM
// RUN: %mercury-opt --allow-unregistered-dialect %t/generic.mlir | %mlir-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=UPSTREAM
// GENERIC: %r:2 = "test.x"() {a = 16, b = -16, c = 255, d = 2748 : ui16, e = 9223372036854775807, f = -9223372036854775808, g = 485 : index, h = [1, -2], i = 1.0 : f32, j = 1.0 : f16, k = 2.0} : () -> (tensor<0x10xf32>, i32)
// UPSTREAM: %0:2 = "test.x"() {a = 16 : i64, b = -16 : i64, c = 255 : i64, d = 2748 : ui16, e = 9223372036854775807 : i64, f = -9223372036854775808 : i64, g = 485 : index, h = [1, -2], i = 1.000000e+00 : f32, j = 1.000000e+00 : f16, k = 2.000000e+00 : f64} : () -> (tensor<0x10xf32>, i32)
//
// Custom forms: hex in every integer of a commir kernel prints back in decimal, and the generic
// form goes through upstream (IRDL) and back to the same kernel.
// RUN: %mercury-opt %t/commir.mlir | FileCheck %s --check-prefix=CUSTOM
// RUN: %mercury-opt --mlir-print-op-generic %t/commir.mlir | FileCheck %s --check-prefix=CGENERIC
// RUN: %mercury-opt --mlir-print-op-generic %t/commir.mlir | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | %mercury-opt | FileCheck %s --check-prefix=CUSTOM
// CUSTOM:      commir.mesh @m shape [2, 4]
// CUSTOM:      commir.axis @i = 64 spatial
// CUSTOM:      commir.axis @j = 4 spatial
// CUSTOM:      commir.buffer @Q : [@i, 8] f32 in sharding [S(zigzag(0), striped(1, 4)), R]
// CUSTOM:      commir.buffer @O : [@j, 8] f32 out sharding [S(1), R]
// CUSTOM:      commir.load @Q[(@j * 16 + 3) mod 64] : !commir.tile<f32>
// CUSTOM-NOT:  0x
// CGENERIC: "commir.mesh"() {sym_name = "m", shape = [2, 4]}
// CGENERIC: "commir.buffer"() {sym_name = "Q", dims = {{\[}}[@i], 8], {{.*}}sharding = {{\[}}{{\[}}["zigzag", 0], ["striped", 1, 4]], []]
// CGENERIC: indices = ["(j * 16 + 3) mod 64"]
//
// Past the range is a located error, never a wrapped value: attributes and extents hold an
// i64, dimensions and striped blocks too; a literal past 64 bits is refused as well.
// RUN: not %mercury-opt --allow-unregistered-dialect --split-input-file %t/overflow.mlir 2>&1 | FileCheck %s --check-prefix=OVERFLOW

//--- generic.mlir
%r:0x2 = "test.x"() {a = 0x10 : i64, b = -0x10 : i64, c = 0xFF, d = 0xAbC : ui16, e = 0x7FFFFFFFFFFFFFFF, f = -0x8000000000000000 : i64, g = 0x1e5 : index, h = [0x1, -0x2], i = 0x3F800000 : f32, j = 0x3C00 : f16, k = 0x4000000000000000 : f64} : () -> (tensor<0x10xf32>, i32)

//--- commir.mlir
commir.mesh @m shape [0x2, 0x4]
commir.kernel @k on @m {
  commir.axis @i = 0x40 spatial
  commir.axis @j = 0x4 spatial
  commir.buffer @Q : [@i, 0x8] f32 in sharding [S(zigzag(0x0), striped(0x1, 0x4)), R]
  commir.buffer @O : [@j, 0x8] f32 out sharding [S(0x1), R]
  commir.for @j {
    %q = commir.load @Q[(@j * 0x10 + 0x3) mod 0x40] : !commir.tile<f32>
    commir.store %q into @O[@j] : !commir.tile<f32>
  }
}

//--- overflow.mlir
// (`0x8000000000000000` is an i64: the bit pattern of -2^63, as upstream reads it.)
// OVERFLOW: overflow.mlir:[[@LINE+1]]:17: error: integer constant out of range for attribute
"test.x"() {a = 0x10000000000000000 : i64} : () -> ()
// -----
// OVERFLOW: overflow.mlir:[[@LINE+1]]:17: error: integer constant out of range for attribute
"test.x"() {a = -0x8000000000000001 : i64} : () -> ()
// -----
// OVERFLOW: overflow.mlir:[[@LINE+1]]:17: error: hexadecimal float constant out of range for type 'f32'
"test.x"() {a = 0x100000000 : f32} : () -> ()
// -----
// OVERFLOW: overflow.mlir:[[@LINE+1]]:4: error: expected named operation to have at least 1 result
%r:0x1001 = "test.x"() : () -> ()
// -----
// OVERFLOW: overflow.mlir:[[@LINE+1]]:22: error: attribute 'shape': '0x8000000000000000' is too large for a 64-bit integer (at most 9223372036854775807)
commir.mesh @m shape [0x8000000000000000]
// -----
commir.mesh @m shape [0x4]
commir.kernel @k on @m {
  // OVERFLOW: overflow.mlir:[[@LINE+1]]:20: error: attribute 'extent': '0xFFFFFFFFFFFFFFFF' is too large for a 64-bit integer
  commir.axis @i = 0xFFFFFFFFFFFFFFFF spatial
}
// -----
commir.mesh @m shape [0x4]
commir.kernel @k on @m {
  commir.axis @i = 0x40 spatial
  // OVERFLOW: overflow.mlir:[[@LINE+1]]:22: error: attribute 'dims': '0xFFFFFFFFFFFFFFFF' is too large for a dimension size (at most 9223372036854775807)
  commir.buffer @A : [@i, 0xFFFFFFFFFFFFFFFF] f32 in
}
// -----
commir.mesh @m shape [0x4]
commir.kernel @k on @m {
  commir.axis @i = 0x40 spatial
  // OVERFLOW: overflow.mlir:[[@LINE+1]]:43: error: attribute 'sharding': the striped block must be a positive integer, found number '0x8000000000000000'
  commir.buffer @A : [@i] f32 in sharding [S(striped(0, 0x8000000000000000))]
}
// -----
commir.mesh @m shape [0x4]
commir.kernel @k on @m {
  commir.axis @i = 0x40 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  // OVERFLOW: overflow.mlir:[[@LINE+1]]:22: error: attribute 'indices': '0x8000000000000000' is too large for a 64-bit integer (at most 9223372036854775807)
  %a = commir.load @A[(@i + 0x8000000000000000) mod 0x10] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}
