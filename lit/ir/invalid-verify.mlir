// Verifier errors of IR that parses but is wrongly typed or structured.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s

// expected-error@+1 {{'arith.constant' value type must match its result type}}
%0 = "arith.constant"() {value = 1 : i32} : () -> i64

// -----

// expected-error@+1 {{'arith.constant' requires attribute 'value'}}
%0 = "arith.constant"() : () -> i32

// -----

// expected-error@+1 {{'arith.constant' expects 0 regions, got 1}}
%0 = "arith.constant"() ({}) {value = 1} : () -> i64

// -----

"func.func"() ({
^bb0(%a: i32):
  // expected-error@+1 {{'arith.addi' expects 1 results, got 2}}
  %0, %1 = "arith.addi"(%a, %a) : (i32, i32) -> (i32, i32)
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// expected-error@+1 {{'arith.addf' expects 2 operands, got 0}}
"arith.addf"() : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32, %b: i64):
  // expected-error@+1 {{'arith.addi' requires operands and result of the same type}}
  %0 = "arith.addi"(%a, %b) : (i32, i64) -> i32
  func.return
}) {sym_name = "f", function_type = (i32, i64) -> ()} : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a, %a : f32 // expected-error {{'arith.addi' requires operands and result of the same type}}
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' requires attribute 'sym_name'}}
"func.func"() ({
  func.return
}) {function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' requires attribute 'function_type'}}
"func.func"() ({
  func.return
}) {sym_name = "f"} : () -> ()

// -----

// expected-error@+1 {{'func.func' attribute 'sym_name' has the wrong kind of value '3' (expected a string)}}
"func.func"() ({
  func.return
}) {sym_name = 3, function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{'func.func' needs a function type in 'function_type'}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = i32} : () -> ()

// -----

// expected-error@+1 {{entry block arguments do not match the function type}}
"func.func"() ({
^bb0(%a: i64):
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

"func.func"() ({
^bb0(%a: i32):
  func.return %a : i32 // expected-error {{returned values do not match the function result types}}
}) {sym_name = "f", function_type = (i32) -> f32} : () -> ()

// -----

// expected-error@+1 {{'func.return' must be inside 'func.func', not 'builtin.module'}}
"func.return"() : () -> ()

// -----

"func.func"() ({
  func.return // expected-error {{'func.return' must be the last operation of its block}}
  %0 = "arith.constant"() {value = 1} : () -> i64
}) {sym_name = "f", function_type = () -> ()} : () -> ()

// -----

// expected-note@+1 {{previous definition is here}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()
// expected-error@+1 {{redefinition of symbol '@f'}}
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()

// -----

// expected-error@+1 {{unregistered operation 'arith.frobnicate' found in dialect ('arith')}}
"arith.frobnicate"() : () -> ()

// -----

// expected-error@+1 {{operation 'mydialect.op' belongs to the unregistered dialect 'mydialect' (use --allow-unregistered-dialect)}}
"mydialect.op"() : () -> ()
