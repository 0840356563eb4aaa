// --mlir-print-op-generic prints every op, the module included, in the generic form; that
// form parses back to the same IR.
// RUN: %mercury-opt --mlir-print-op-generic %s | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mercury-opt | FileCheck %s --check-prefix=CUSTOM
// RUN: %mercury-opt %s | %mercury-opt --mlir-print-op-generic | FileCheck %s
// Single-dash long options are accepted, as in mlir-opt.
// RUN: %mercury-opt -mlir-print-op-generic %s | FileCheck %s

// CHECK-LABEL: "builtin.module"() ({
// CHECK-NEXT: "func.func"() ({
// CHECK-NEXT: ^bb0(%[[A:.*]]: i32):
// CHECK-NEXT: %[[S:.*]] = "arith.addi"(%[[A]], %[[A]]) : (i32, i32) -> i32
// CHECK-NEXT: "func.return"(%[[S]]) : (i32) -> ()
// CHECK-NEXT: }) {sym_name = "f", function_type = (i32) -> i32} : () -> ()
// CHECK-NEXT: }) : () -> ()
// CHECK-NOT: arith.addi %

// CUSTOM: module {
// CUSTOM: arith.addi %{{.*}}, %{{.*}} : i32
// CUSTOM: return %{{.*}} : i32
module {
  "func.func"() ({
  ^bb0(%a: i32):
    %s = arith.addi %a, %a : i32
    func.return %s : i32
  }) {sym_name = "f", function_type = (i32) -> i32} : () -> ()
}
