// --canonicalize removes side-effect-free ops whose results are unused, until nothing changes;
// ops without the Pure trait stay.
// RUN: %mercury-opt --allow-unregistered-dialect --canonicalize %s | FileCheck %s
// RUN: %mercury-opt --allow-unregistered-dialect --pass-pipeline='builtin.module(canonicalize)' %s | FileCheck %s

// CHECK: func.func @f(%[[A:.*]]: i32) -> i32 {
// CHECK-NEXT: %[[C:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[USED:.*]] = arith.muli %[[A]], %[[C]] : i32
// CHECK-NEXT: %{{.*}} = "test.effect"(%[[A]]) : (i32) -> i32
// CHECK-NEXT: return %[[USED]] : i32
// CHECK-NEXT: }
"func.func"() ({
^bb0(%a: i32):
  %c = "arith.constant"() {value = 2 : i32} : () -> i32
  %unused_const = "arith.constant"() {value = 3 : i32} : () -> i32
  // A chain of unused pure ops disappears from the end inwards.
  %dead1 = arith.addi %a, %a : i32
  %dead2 = arith.muli %dead1, %dead1 : i32
  %used = arith.muli %a, %c : i32
  // Unknown ops may have side effects: kept although unused.
  %kept = "test.effect"(%a) : (i32) -> i32
  func.return %used : i32
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()
// CHECK-NOT: dead
// CHECK-NOT: unused_const
