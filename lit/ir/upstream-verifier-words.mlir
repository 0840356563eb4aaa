// The generic verifier's words are upstream's (OpDefinition.cpp's operand, result and region
// counts, in its order of traits: regions, results, operands; a missing inherent attribute;
// a symbol defined twice; a name bound to an op without results),
// and so are func's type mismatches (types quoted, as MLIR's diagnostics print
// them): the same annotations hold in mlir-opt-22, so upstream test files' expected errors
// match ours.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s
// RUN: %mlir-opt --split-input-file --verify-diagnostics %s

func.func @counts(%a: i32, %b: f32) {
  // expected-error@+1 {{'arith.addi' op requires one result}}
  %0:2 = "arith.addi"(%a, %a) : (i32, i32) -> (i32, i32)
  return
}

// -----

func.func @counts(%a: i32) {
  // expected-error@+1 {{'arith.constant' op requires zero operands}}
  %0 = "arith.constant"(%a) <{value = 1 : i32}> : (i32) -> i32
  return
}

// -----

func.func @counts(%a: i32) {
  // expected-error@+1 {{'arith.addi' op requires zero regions}}
  %0 = "arith.addi"(%a, %a) ({}) : (i32, i32) -> i32
  return
}

// -----

func.func @counts(%a: i32) {
  // expected-error@+1 {{'arith.select' op expected 3 operands, but found 4}}
  %0 = "arith.select"(%a, %a, %a, %a) : (i32, i32, i32, i32) -> i32
  return
}

// -----

func.func @counts(%b: f32) {
  // expected-error@+1 {{'arith.negf' op requires a single operand}}
  %0 = "arith.negf"(%b, %b) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
  return
}

// -----

func.func @counts() {
  // expected-error@+1 {{'func.call_indirect' op expected 1 or more operands, but found 0}}
  "func.call_indirect"() : () -> ()
  return
}

// -----

// expected-error@+1 {{'func.func' op requires one region}}
"func.func"() <{function_type = () -> (), sym_name = "g"}> : () -> ()

// -----

func.func @attribute() {
  // expected-error@+1 {{'arith.constant' op requires attribute 'value'}}
  %0 = "arith.constant"() : () -> i32
  return
}

// -----

func.func @return_type(%a: i32) -> f32 {
  // expected-error@+1 {{type of return operand 0 ('i32') doesn't match function result type ('f32') in function @return_type}}
  return %a : i32
}

// -----

// expected-error@+1 {{'func.func' op type of entry block argument #0('i64') must match the type of the corresponding argument in function signature('i32')}}
"func.func"() <{function_type = (i32) -> (), sym_name = "entry"}> ({
^bb0(%a: i64):
  "func.return"() : () -> ()
}) : () -> ()


// -----

func.func @twice() {
  return
}
// expected-note@-3 {{see existing symbol definition here}}
// expected-error@+1 {{redefinition of symbol named 'twice'}}
func.func @twice() {
  return
}

// -----

func.func @named_nothing() {
  // expected-error@+1 {{cannot name an operation with no results}}
  %0 = "func.call"() <{callee = @named_nothing}> : () -> ()
  return
}
