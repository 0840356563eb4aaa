// Value names as mlir-opt prints them (scoped per region, as upstream's SSANameState):
// every function starts again at %arg0 and %0; a region's values are numbered before the
// regions nested in it, which continue from where it ended, and sibling regions start from
// the same number; an entry block's unnamed arguments are %argN (continuing the enclosing
// count in a nested region), other blocks' are numbered as values; an op's unnamed results
// are one group %N:2. Names spelled with digits in the source are renumbered; our print is
// mlir-opt's print of the same file (less its `// pred:` comments).
// RUN: %mercury-opt --allow-unregistered-dialect %s > %t.ours
// RUN: %mlir-opt --allow-unregistered-dialect %s --split-input-file | sed -e 's|  // pred:.*||' -e '/^$/d' > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt --allow-unregistered-dialect %s | FileCheck %s
// RUN: %mercury-opt --allow-unregistered-dialect %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @first(%arg0: i32, %arg1: i32) -> i32 {
// CHECK-NEXT:    %0 = arith.addi %arg0, %arg1 : i32
// CHECK-NEXT:    %1 = arith.muli %0, %0 : i32
// CHECK-NEXT:    return %1 : i32
func.func @first(%0: i32, %1: i32) -> i32 {
  %2 = arith.addi %0, %1 : i32
  %3 = arith.muli %2, %2 : i32
  return %3 : i32
}

// CHECK-LABEL: func.func @second(%arg0: i32) -> (i32, i32) {
// CHECK-NEXT:    %0 = "test.region"() ({
// CHECK-NEXT:      %5 = arith.addi %arg0, %arg0 : i32
// CHECK-NEXT:      "test.region"() ({
// CHECK-NEXT:        %6 = arith.subi %5, %arg0 : i32
// CHECK:         }, {
// CHECK-NEXT:      %5 = arith.muli %arg0, %arg0 : i32
// CHECK:         %1:2 = "test.two"(%0) : (i32) -> (i32, i32)
// CHECK-NEXT:    %2:2 = "test.two"(%1#1) : (i32) -> (i32, i32)
// CHECK-NEXT:    "test.br"(%2#1)[^bb1] : (i32) -> ()
// CHECK-NEXT:  ^bb1(%3: i32):
// CHECK-NEXT:    %4 = "test.isolated"() ({
// CHECK-NEXT:    ^bb0(%arg1: i32):
// CHECK-NEXT:      %5 = arith.addi %arg1, %arg1 : i32
// CHECK:         return %3, %4 : i32, i32

// GENERIC:       ^bb0(%arg0: i32, %arg1: i32):
// GENERIC-NEXT:    %0 = "arith.addi"(%arg0, %arg1) : (i32, i32) -> i32
// GENERIC:       ^bb0(%arg0: i32):
// GENERIC-NEXT:    %0 = "test.region"() ({
// GENERIC-NEXT:      %5 = "arith.addi"(%arg0, %arg0) : (i32, i32) -> i32
func.func @second(%0: i32) -> (i32, i32) {
  %1 = "test.region"() ({
    %2 = arith.addi %0, %0 : i32
    "test.region"() ({
      %3 = arith.subi %2, %0 : i32
      "test.yield"(%3) : (i32) -> ()
    }) : () -> ()
    "test.yield"(%2) : (i32) -> ()
  }, {
    %4 = arith.muli %0, %0 : i32
    "test.yield"(%4) : (i32) -> ()
  }) : () -> i32
  %5:2 = "test.two"(%1) : (i32) -> (i32, i32)
  %6, %7 = "test.two"(%5#1) : (i32) -> (i32, i32)
  "test.br"(%7)[^bb1] : (i32) -> ()
^bb1(%8: i32):
  %9 = "test.isolated"() ({
  ^bb0(%10: i32):
    %11 = arith.addi %10, %10 : i32
    "test.yield"(%11) : (i32) -> ()
  }) : () -> i32
  return %8, %9 : i32, i32
}

// A function nested in a module inside a function continues the enclosing counts.
// CHECK-LABEL: func.func @outer(%arg0: i32) {
// CHECK-NEXT:    "test.region"() ({
// CHECK-NEXT:      builtin.module {
// CHECK-NEXT:        func.func @inner(%arg1: i32) -> i32 {
// CHECK-NEXT:          %1 = arith.addi %arg1, %arg1 : i32
// CHECK:         %0 = arith.addi %arg0, %arg0 : i32
func.func @outer(%0: i32) {
  "test.region"() ({
    builtin.module {
      func.func @inner(%1: i32) -> i32 {
        %2 = arith.addi %1, %1 : i32
        return %2 : i32
      }
    }
    "test.yield"() : () -> ()
  }) : () -> ()
  %3 = arith.addi %0, %0 : i32
  return
}
