// The func dialect's verifiers refuse what upstream refuses, at the same place.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// expected-error@+1 {{symbol declaration cannot have public visibility}}
func.func @public_declaration(i32)

// -----

func.func @wrong_return(%a: i32) -> f32 {
  // expected-error@+1 {{type of return operand 0 ('i32') doesn't match function result type ('f32') in function @wrong_return}}
  return %a : i32
}

// -----

func.func @count(%a: i32) -> (i32, i32) {
  // expected-error@+1 {{'func.return' op has 1 operands, but enclosing function (@count) returns 2}}
  return %a : i32
}

// -----

func.func @no_terminator(%a: i32) {
  // expected-error@+1 {{block with no terminator, has 'arith.addi'}}
  %0 = arith.addi %a, %a : i32
}

// -----

func.func private @callee(i32) -> i32

func.func @caller(%a: f32) {
  // expected-error@+1 {{'func.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0}}
  %0 = call @callee(%a) : (f32) -> i32
  return
}

// -----

func.func @caller() {
  // expected-error@+1 {{'func.call' op 'missing' does not reference a valid function}}
  call @missing() : () -> ()
  return
}

// -----

// expected-error@+1 {{'func.func' op expects argument attribute array to have the same number of elements as the number of function arguments, got 1, but expected 2}}
"func.func"() ({
^bb0(%a: i32, %b: i32):
  "func.return"() : () -> ()
}) {sym_name = "f", function_type = (i32, i32) -> (), arg_attrs = [{}]} : () -> ()

// -----

// expected-error@+1 {{arguments may only have dialect attributes}}
func.func private @plain_arg_attr(i1 {plain = 1})

// -----

// A block of a function's body needs a terminator: an empty one has none.
// expected-error@+1 {{empty block: expect at least a terminator}}
func.func @empty_successor_block() {
  "foo.br"()[^bb1] : () -> ()
^bb1:
}

// -----

// A function inside a function is in no symbol table (upstream refuses it in these words).
func.func @outer() {
  // expected-error@+1 {{'func.func' op symbol's parent must have the SymbolTable trait}}
  func.func @inner() {
    return
  }
  return
}

// -----

// Inside an unregistered op (which may be a symbol table, as upstream assumes) it is taken.
"test.symbol_scope"() ({
  func.func @in_unknown() {
    return
  }
}) : () -> ()
