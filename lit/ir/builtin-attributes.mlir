// Builtin attributes as the LangRef and the Builtin dialect documentation define them, and
// attribute aliases: typed integers and floats (wide and hexadecimal literals), dense, sparse
// and dense_resource elements, dense arrays, affine maps and sets, strided layouts, distinct
// attributes, symbol references, opaque and dialect attributes. What we print reads back in
// upstream mlir-opt as the same IR.
// RUN: %mercury-opt --allow-unregistered-dialect %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic > %t.ours
// RUN: %mlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt --allow-unregistered-dialect %s | FileCheck %s

#id = affine_map<(d0) -> (d0)>
#dict = {a = 1 : i8, b = [#id]}

// CHECK: "test.ints"() {a = -1 : i8, b = 200 : ui8, c = -128 : si8, d = 1180591620717411303424 : i72, e = true, f = 255}
"test.ints"() {a = 255 : i8, b = 200 : ui8, c = -128 : si8, d = 0x400000000000000000 : i72, e = true, f = 0xff} : () -> ()
// CHECK: "test.floats"() {a = 1.5 : f16, b = 0x7F800000 : f32, c = 30000000000.0, d = -0.0 : bf16}
"test.floats"() {a = 1.5 : f16, b = 0x7F800000 : f32, c = 30000000000.0, d = -0.0 : bf16} : () -> ()
"test.elements"() {
  a = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi16>,
  b = dense<true> : vector<4xi1>,
  c = dense<[(1.0, 2.0), (0.5, -1.0)]> : tensor<2xcomplex<f32>>,
  d = dense<> : tensor<0xf32>,
  e = sparse<[[0, 0], [1, 2]], [1.5, -2.0]> : tensor<3x4xf32>,
  f = dense_resource<blob1> : tensor<4xi8>,
  g = array<i32: 1, -2, 3>,
  h = array<f64>,
  i = array<i1: true, false>
} : () -> ()
"test.maps"() {
  m = affine_map<(d0, d1)[s0] -> (d0 floordiv 4 + s0, d1 mod 2, -d0 * 3)>,
  s = affine_set<(d0)[s0] : (d0 - s0 >= 0, d0 == 0)>,
  st = strided<[?, 1], offset: 16>,
  al = #dict
} : () -> ()
"test.refs"() {
  sym = @a::@b::@"c d",
  d1 = distinct[0]<42 : i32>,
  d2 = distinct[0]<42 : i32>,
  opaque = #foo<"any text here">,
  dialect = #foo.bar<{x = [1, 2]}>,
  ty = !foo<"opaque type">
} : () -> ()
