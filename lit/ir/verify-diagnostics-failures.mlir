// --verify-diagnostics fails (exit 1) with a located message for each mismatch.
// RUN: not %mercury-opt --split-input-file --verify-diagnostics %s 2>&1 | FileCheck %s

// An annotation nothing matches.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:58: error: expected error "never happens" was not produced
%0 = "arith.constant"() {value = 1 : i32} : () -> i32 // expected-error {{never happens}}

// -----

// A diagnostic without an annotation.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:6: error: unexpected error: 'arith.constant' op failed to verify that all of {value, result} have same type
%0 = "arith.constant"() {value = 1 : i32} : () -> i64

// -----

// The right line, other text: both the diagnostic and the annotation are reported.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+2]]:6: error: unexpected error: 'arith.constant' op failed to verify that all of {value, result} have same type
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:58: error: expected error "some other text" was not produced
%0 = "arith.constant"() {value = 1 : i32} : () -> i64 // expected-error {{some other text}}

// -----

// The wrong line: the note points to where the diagnostic was emitted.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+3]]:1: error: unexpected error: 'arith.addf' op requires one result
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: expected error "requires one result" was not produced
// expected-error@+2 {{requires one result}}
"arith.addf"() : () -> ()
"arith.mulf"() : () -> () // (only the first verifier error is reported)
// CHECK: verify-diagnostics-failures.mlir:[[@LINE-2]]:1: note: a matching error was emitted here instead

// -----

// The right line and text, another severity.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+2]]:1: error: 'error' diagnostic emitted when expecting a 'warning': 'arith.addf' op requires one result
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:30: error: expected warning "requires one result" was not produced
"arith.addf"() : () -> () // expected-warning {{requires one result}}

// -----

// Malformed annotations are errors, not silently ignored. (The CHECK lines spell the
// annotation names with a regex so that they are not annotations themselves.)
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: unknown line designator '@+two' in expected-error
// expected-error@+two {{x}}
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: expected-{{e}}rror {{[{][{]}}...: missing the closing '{{[}][}]}}'
// expected-error {{x
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: expected-{{e}}rror-re is not supported
// expected-error-re {{x.*}}
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: line designator points to line {{-?[0-9]+}}, outside this input
// expected-error@-100 {{x}}
// A dangling @below refers to the empty last line.
// CHECK: verify-diagnostics-failures.mlir:[[@LINE+1]]:4: error: expected error "x" was not produced
// expected-error@below {{x}}
