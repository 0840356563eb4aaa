// Ops with an assembly format print in custom form, and the custom form parses.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s

// CHECK-LABEL: module {
// CHECK: func.func @f(%[[A:.*]]: i32, %[[B:.*]]: f32) -> (i32, f32) {
// CHECK-NEXT: %[[S:.*]] = arith.addi %[[A]], %[[A]] : i32
// CHECK-NEXT: %[[P:.*]] = arith.muli %[[S]], %[[A]] : i32
// CHECK-NEXT: %[[F:.*]] = arith.addf %[[B]], %[[B]] : f32
// CHECK-NEXT: %[[G:.*]] = arith.mulf %[[F]], %[[B]] fastmath<fast> : f32
// CHECK-NEXT: return %[[P]], %[[G]] : i32, f32
"func.func"() ({
^bb0(%a: i32, %b: f32):
  %s = "arith.addi"(%a, %a) : (i32, i32) -> i32
  %p = arith.muli %s, %a : i32
  %f = "arith.addf"(%b, %b) : (f32, f32) -> f32
  %g = arith.mulf %f, %b fastmath<fast> : f32
  func.return %p, %g : i32, f32
}) {sym_name = "f", function_type = (i32, f32) -> (i32, f32)} : () -> ()

// A module in custom form, with a name and attributes.
// CHECK: module @inner attributes {my.tag = "x"} {
// CHECK-NEXT: func.func @g() {
module @inner attributes {my.tag = "x"} {
  "func.func"() ({
    func.return
  }) {sym_name = "g", function_type = () -> ()} : () -> ()
}

// A trailing comment ends a custom-form op, whatever it contains.
// CHECK: func.func @comments(%[[X:.*]]: i32) -> i32 {
// CHECK-NEXT: %[[Y:.*]] = arith.addi %[[X]], %[[X]] : i32
// CHECK-NEXT: return %[[Y]] : i32
"func.func"() ({
^bb0(%x: i32):
  %y = arith.addi %x, %x : i32 // a comment with {{braces}}, (parens), [brackets] and / slashes
  func.return %y : i32 //no space
}) {sym_name = "comments", function_type = (i32) -> i32} : () -> ()
