// Verifier errors of IR that parses but is wrongly typed or structured.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s

// expected-error@+1 {{'arith.constant' op failed to verify that all of {value, result} have same type}}
%0 = "arith.constant"() {value = 1 : i32} : () -> i64

// -----

// expected-error@+1 {{'arith.constant' op requires attribute 'value'}}
%0 = "arith.constant"() : () -> i32

// -----

// expected-error@+1 {{'arith.constant' op requires zero regions}}
%0 = "arith.constant"() ({}) {value = 1} : () -> i64

// -----

"func.func"() ({
^bb0(%a: i32):
  // expected-error@+1 {{'arith.addi' op requires one result}}
  %0, %1 = "arith.addi"(%a, %a) : (i32, i32) -> (i32, i32)
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// expected-error@+1 {{'arith.addf' op requires one result}}
"arith.addf"() : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32, %b: i64):
  // expected-error@+1 {{'arith.addi' op requires the same type for all operands and results}}
  %0 = "arith.addi"(%a, %b) : (i32, i64) -> i32
  func.return
}) {sym_name = "f", function_type = (i32, i64) -> ()} : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a, %a : f32 // expected-error {{use of value '%a' expects different type than prior uses: 'f32' vs 'i32'}}
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' op requires attribute 'sym_name'}}
"func.func"() ({
  func.return
}) {function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' op requires attribute 'function_type'}}
"func.func"() ({
  func.return
}) {sym_name = "f"} : () -> ()

// -----

// expected-error@+1 {{'func.func' attribute 'sym_name' has the wrong kind of value '3' (expected a string)}}
"func.func"() ({
  func.return
}) {sym_name = 3, function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' op requires attribute 'function_type' to be a function type}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = i32} : () -> ()

// -----

// expected-error@+1 {{'func.func' op type of entry block argument #0('i64') must match the type of the corresponding argument in function signature('i32')}}
"func.func"() ({
^bb0(%a: i64):
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32):
  func.return %a : i32 // expected-error {{type of return operand 0 ('i32') doesn't match function result type ('f32') in function @f}}
}) {sym_name = "f", function_type = (i32) -> f32} : () -> ()

// -----

// expected-error@+1 {{'func.return' op expects parent op 'func.func'}}
"func.return"() : () -> ()

// -----

"func.func"() ({
  "func.return"() : () -> () // expected-error {{'func.return' op must be the last operation in the parent block}}
  %0 = "arith.constant"() {value = 1} : () -> i64
}) {sym_name = "f", function_type = () -> ()} : () -> ()

// -----

// expected-note@+1 {{see existing symbol definition here}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()
// expected-error@+1 {{redefinition of symbol named 'f'}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{unregistered operation 'arith.frobnicate' found in dialect ('arith')}}
"arith.frobnicate"() : () -> ()

// -----

// expected-error@+1 {{operation 'mydialect.op' belongs to the unregistered dialect 'mydialect' (use --allow-unregistered-dialect)}}
"mydialect.op"() : () -> ()
