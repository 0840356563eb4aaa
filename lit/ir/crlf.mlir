// Windows line ends (CRLF) parse like LF ones, custom-form ops and trailing comments included.
// The input really has CRLF line ends (git must not normalise them away):
// RUN: %python -c "import sys; sys.exit(0 if open(sys.argv[1], 'rb').read().count(b'\r\n') >= 5 else 1)" %S/Inputs/crlf.mlir
// RUN: %mercury-opt %S/Inputs/crlf.mlir | FileCheck %s
// CHECK: func.func @crlf(%[[A:.*]]: i32) -> i32 {
// CHECK-NEXT: %[[S:.*]] = arith.addi %[[A]], %[[A]] : i32
// CHECK-NEXT: return %[[S]] : i32
// CHECK-NEXT: }
