// Printing what was parsed is a fixed point, and the printed form parses back.
// RUN: %mercury-opt --allow-unregistered-dialect %s | %mercury-opt --allow-unregistered-dialect | FileCheck %s
// RUN: %mercury-opt --allow-unregistered-dialect %s -o %t.1
// RUN: %mercury-opt --allow-unregistered-dialect %t.1 -o %t.2
// RUN: diff %t.1 %t.2

// CHECK-LABEL: module {
// CHECK-NEXT: "test.types"() {i = 42, i8 = -3 : i8, si = 7 : si32, ui = 9 : ui16, idx = 5 : index,
// CHECK-SAME: f = 1.5, h = 2.0 : f16, b = 0.25 : bf16, g = 0.001 : f32,
// CHECK-SAME: s = "quote\" backslash\\ newline\n tab\t", t = true, u, n,
// CHECK-SAME: arr = [1, [2, 3], []], d = {a = 1, "b c" = "x"},
// CHECK-SAME: sym = @f, nested = @outer::@inner, qsym = @"weird name",
// CHECK-SAME: ty1 = tensor<4x?x8xbf16>, ty2 = memref<16xf32>, ty3 = vector<4xi1>,
// CHECK-SAME: ty4 = tuple<i32, f64>, ty5 = (i32, f32) -> i64, ty6 = () -> (),
// CHECK-SAME: dt = !foo.bar<"x", <nested>, 3>, da = #foo.baz<1 : i32>, dn = !foo.plain} : () -> ()
"test.types"() {
  i = 42, i8 = -3 : i8, si = 7 : si32, ui = 9 : ui16, idx = 5 : index,
  f = 1.5, h = 2.0 : f16, b = 0.25 : bf16, g = 1.0e-3 : f32,
  s = "quote\" backslash\\ newline\n tab\t", t = true, u = unit, n,
  arr = [1, [2, 3], []], d = {a = 1, "b c" = "x"},
  sym = @f, nested = @outer::@inner, qsym = @"weird name",
  ty1 = tensor<4x?x8xbf16>, ty2 = memref<16xf32>, ty3 = vector<4xi1>,
  ty4 = tuple<i32, f64>, ty5 = (i32, f32) -> (i64), ty6 = () -> (),
  dt = !foo.bar<"x", <nested>, 3>, da = #foo.baz<1 : i32>, dn = !foo.plain
} : () -> ()

// A result group prints as a group again; uses keep their order.
// CHECK-NEXT: %[[A:.*]]:2 = "test.two"() : () -> (i32, f32)
// CHECK-NEXT: %[[B:.*]] = "test.use"(%[[A]]#1, %[[A]]#0) : (f32, i32) -> f32
%a:2 = "test.two"() : () -> (i32, f32)
%b = "test.use"(%a#1, %a#0) : (f32, i32) -> f32

// Regions, block arguments, values from an enclosing region, an empty region.
// CHECK-NEXT: "test.region"() ({
// CHECK-NEXT: ^bb0(%[[X:.*]]: i32):
// CHECK-NEXT:   "test.use2"(%[[X]], %[[B]]) : (i32, f32) -> ()
// CHECK-NEXT: }, {
// CHECK-NEXT: }) : () -> ()
"test.region"() ({
^bb0(%x: i32):
  "test.use2"(%x, %b) : (i32, f32) -> ()
}, {
}) : () -> ()

// Values with the same source name in sibling isolated regions stay distinct when printed.
// CHECK: func.func @id1(%[[P:.*]]: f32) -> f32 {
// CHECK-NEXT:   return %[[P]] : f32
// CHECK: func.func @id2(%[[Q:.*]]: f32) -> f32 {
// CHECK-NEXT:   return %[[Q]] : f32
"func.func"() ({
^bb0(%p: f32):
  "func.return"(%p) : (f32) -> ()
}) {sym_name = "id1", function_type = (f32) -> f32} : () -> ()
"func.func"() ({
^bb0(%p: f32):
  "func.return"(%p) : (f32) -> ()
}) {sym_name = "id2", function_type = (f32) -> f32} : () -> ()
// CHECK-NEXT: }
// CHECK-NEXT: }
