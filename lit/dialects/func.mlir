// The func dialect as the Func dialect documentation writes it: func.func in custom form
// (visibility, declarations, argument and result attributes, `attributes`), its body with
// `func` as the default dialect (`return`, `call`), call_indirect and constant. What we print
// reads back in upstream mlir-opt as the same IR (compared through its generic print).
// RUN: %mercury-opt %s | %mlir-opt --mlir-print-op-generic > %t.ours
// RUN: %mlir-opt %s --mlir-print-op-generic > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt %s | FileCheck %s

// CHECK-LABEL: func.func @add(%a: i32, %b: i32) -> i32 {
// CHECK-NEXT:    %sum = arith.addi %a, %b : i32
// CHECK-NEXT:    return %sum : i32
func.func @add(%a: i32, %b: i32) -> i32 {
  %sum = arith.addi %a, %b : i32
  return %sum : i32
}

// CHECK: func.func private @external(i32, f32 {arg.note = "x"}) -> (i64 {res.kind = 1 : i32})
func.func private @external(i32, f32 {arg.note = "x"}) -> (i64 {res.kind = 1 : i32})

// CHECK-LABEL: func.func nested @two_results
// CHECK-SAME: -> (i32, i32) attributes {my.flag} {
func.func nested @two_results(%x: i32) -> (i32, i32) attributes {my.flag} {
  return %x, %x : i32, i32
}

// A body whose entry block names its arguments itself.
// CHECK-LABEL: func.func @labelled(%{{.*}}: i32) {
func.func @labelled(i32) {
^bb0(%v: i32):
  return
}

// CHECK-LABEL: func.func @calls
// CHECK:      %r:2 = call @two_results(%n) : (i32) -> (i32, i32)
// CHECK:      %f = constant @add : (i32, i32) -> i32
// CHECK:      %s = call_indirect %f(%r#0, %r#1) : (i32, i32) -> i32
// CHECK:      call @external(%s, %h) : (i32, f32) -> i64
func.func @calls(%n: i32, %h: f32) -> i64 {
  %r:2 = func.call @two_results(%n) : (i32) -> (i32, i32)
  %f = func.constant @add : (i32, i32) -> i32
  %s = func.call_indirect %f(%r#0, %r#1) : (i32, i32) -> i32
  %e = call @external(%s, %h)
      : (i32, f32) -> i64
  return %e : i64
}
