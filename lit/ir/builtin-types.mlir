// Builtin types as the LangRef and the Builtin dialect documentation define them: integers
// of any width to 2^24 - 1, every builtin float type, complex, tuples, functions, ranked,
// unranked and encoded tensors, memrefs with layouts (affine and strided) and memory
// spaces, scalable vectors, whitespace in shapes, type aliases. What we print reads back in
// upstream mlir-opt as the same IR.
// RUN: %mercury-opt --allow-unregistered-dialect %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic > %t.ours
// RUN: %mlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt --allow-unregistered-dialect %s | FileCheck %s

!pair = tuple<i32, !foo.bar<"x">>
#layout = affine_map<(d0, d1)[s0] -> (d0 * s0 + d1)>

// CHECK: "test.ints"() {a = i1, b = si7, c = ui64, d = i16777215, e = index} : () -> ()
"test.ints"() {a = i1, b = si7, c = ui64, d = i16777215, e = index} : () -> ()
// CHECK: f4E2M1FN, f6E2M3FN, f6E3M2FN, f8E5M2, f8E4M3, f8E4M3FN, f8E5M2FNUZ, f8E4M3FNUZ, f8E4M3B11FNUZ, f8E3M4, f8E8M0FNU, bf16, f16, tf32, f32, f64, f80, f128
"test.floats"() {t = [f4E2M1FN, f6E2M3FN, f6E3M2FN, f8E5M2, f8E4M3, f8E4M3FN, f8E5M2FNUZ, f8E4M3FNUZ, f8E4M3B11FNUZ, f8E3M4, f8E8M0FNU, bf16, f16, tf32, f32, f64, f80, f128]} : () -> ()
// CHECK: complex<f32>, complex<i8>, tuple<i32, !foo.bar<"x">>, tuple<>, (i32, f32) -> (), none
"test.composite"() {t = [complex<f32>, complex<i8>, !pair, tuple<>, (i32, f32) -> (), none]} : () -> ()
// CHECK: tensor<4x?x8xf32>, tensor<*xf32>, tensor<f32>, tensor<0x10xi8>, tensor<8xi32, "sparse">
"test.tensors"() {t = [tensor<4 x ? x 8 x f32>, tensor<*xf32>, tensor<f32>, tensor<0x10xi8>, tensor<8xi32, "sparse">]} : () -> ()
// CHECK: memref<4x4xf32, affine_map<(d0, d1)[s0] -> (d0 * s0 + d1)>>, memref<?xf32, strided<[1], offset: ?>>, memref<8xi8, 3>, memref<*xf16, 1>, memref<2x2xf32, strided<[2, 1]>, "shared">
"test.memrefs"() {t = [memref<4x4xf32, #layout>, memref<?xf32, strided<[1], offset: ?>>, memref<8xi8, 3>, memref<*xf16, 1>, memref<2x2xf32, strided<[2, 1]>, "shared">]} : () -> ()
// CHECK: vector<4xf32>, vector<[4]xi8>, vector<2x[8]xf16>, vector<1x1xindex>
"test.vectors"() {t = [vector<4xf32>, vector<[4]xi8>, vector<2x[8]xf16>, vector<1x1xindex>]} : () -> ()
