// --split-input-file processes each chunk between split markers (`//` and five dashes) on
// its own and joins the outputs with the marker. A chunk with an error is reported with its line in the whole file; the other
// chunks are still printed, the failed one's markers kept (as mlir-opt), and the exit status
// is 1.
// RUN: not %mercury-opt --split-input-file %s > %t.out 2> %t.err
// RUN: FileCheck %s --check-prefix=OUT < %t.out
// RUN: FileCheck %s --check-prefix=ERR < %t.err
// Without the flag the marker is a comment and the value names clash.
// RUN: not %mercury-opt %s 2>&1 | FileCheck %s --check-prefix=WHOLE

// OUT: module {
// OUT-NEXT: %v = arith.constant 1 : i32
// OUT-NEXT: }
// OUT-NEXT: {{//}} -----
// OUT-NEXT: {{//}} -----
// OUT-NEXT: module {
// OUT-NEXT: %v = arith.constant 3 : i32
// OUT-NEXT: }
// OUT-NOT: {{.}}
%v = "arith.constant"() {value = 1 : i32} : () -> i32

// -----

// ERR: split-input-file.mlir:[[@LINE+4]]:6: error: 'arith.constant' op failed to verify that all of {value, result} have same type
// ERR-NEXT: {{^}}%v = "arith.constant"() {value = 2 : i64} : () -> i32
// ERR-NEXT: {{^}}     ^
// WHOLE: split-input-file.mlir:[[@LINE+1]]:1: error: redefinition of SSA value '%v'
%v = "arith.constant"() {value = 2 : i64} : () -> i32

// -----

%v = "arith.constant"() {value = 3 : i32} : () -> i32
