// --verify-diagnostics: every diagnostic matches an annotation and every annotation is met.
// Success is exit 0 and nothing on stderr.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s 2> %t.err
// RUN: count 0 < %t.err
// Chunks without diagnostics are still printed.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s | FileCheck %s

// On the annotation's own line.
%0 = "arith.constant"() {value = 1 : i32} : () -> i64 // expected-error {{failed to verify that all of {value, result} have same type}}

// -----

// @+N: N lines below.
// expected-error@+1 {{use of undeclared SSA value name '%x'}}
%0 = arith.addi %x, %x : i32

// -----

"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()
// @-N: N lines above; a note attached to an error is matched as well.
// expected-error@+2 {{redefinition of symbol named 'f'}}
// expected-note@-5 {{see existing symbol definition here}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()

// -----

// @below: the next line that carries no annotation.
// expected-error@below {{'arith.addf' op requires one result}}
"arith.addf"() : () -> ()

// -----

// @above: the nearest line above that carries no annotation.
"func.func"() ({
^bb0(%a: i32):
  func.return %a : i32
  // expected-error@above {{type of return operand 0 ('i32') doesn't match function result type ('f32') in function @g}}
}) {sym_name = "g", function_type = (i32) -> f32} : () -> ()

// -----

// A substring is enough.
"x.y"() : () -> () // expected-error {{unregistered dialect 'x'}}

// -----

// CHECK: module {
// CHECK-NEXT: arith.constant 7 : i32
%ok = "arith.constant"() {value = 7 : i32} : () -> i32
