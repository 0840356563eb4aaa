// Parse errors of truncated, garbled and wrongly typed IR: each chunk fails with
// `file:line:col: error: message`, the source line and a caret under the column.
// Generated from the cases in the comments; the diagnostics were reviewed by hand.
// RUN: not %mercury-opt --allow-unregistered-dialect --split-input-file %s 2>&1 | FileCheck --strict-whitespace %s

// an undeclared operand
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:14: error: use of undeclared SSA value name '%a'
// CHECK-NEXT: {{^}}"arith.addf"(%a, %a) : (f32, f32) -> f32{{$}}
// CHECK-NEXT: {{^}}             ^{{$}}
"arith.addf"(%a, %a) : (f32, f32) -> f32

// -----

// garbage after an operation
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:55: error: expected a token or an operation or end of input, found '%'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32} : () -> i32 %1{{$}}
// CHECK-NEXT: {{^}}                                                      ^{{$}}
%0 = "arith.constant"() {value = 1 : i32} : () -> i32 %1

// -----

// truncated: the result type is missing at the end of the input
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:1: error: expected a type, found end of input
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}^{{$}}
%0 = "arith.constant"() {value = 1 : i32} : () ->

// -----

// truncated: no function type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:38: error: expected a token or a type, found 'i'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32}{{$}}
// CHECK-NEXT: {{^}}                                     ^{{$}}
%0 = "arith.constant"() {value = 1 : i32}

// -----

// truncated: unclosed attribute dictionary
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:38: error: expected a token or a type, found 'i'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32 : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                     ^{{$}}
%0 = "arith.constant"() {value = 1 : i32 : () -> i32

// -----

// truncated: unclosed region
// CHECK: invalid-syntax.mlir:[[@LINE+6]]:1: error: expected a block or an operation, found end of input
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}^{{$}}
module {
  "func.func"() ({

// -----

// truncated: a result name and nothing else
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:1: error: expected a string or an operation name, found end of input
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}^{{$}}
%0 =

// -----

// truncated: a custom op without operands
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:16: error: expected SSA value for operand 'lhs'
// CHECK-NEXT: {{^}}%0 = arith.addi{{$}}
// CHECK-NEXT: {{^}}               ^{{$}}
%0 = arith.addi

// -----

// truncated: unterminated string
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:14: error: expected an attribute, found '"'
// CHECK-NEXT: {{^}}"a.b"() {x = "unterminated} : () -> (){{$}}
// CHECK-NEXT: {{^}}             ^{{$}}
"a.b"() {x = "unterminated} : () -> ()

// -----

// truncated: unclosed tensor type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:23: error: expected a number or a token or a type, found 'f'
// CHECK-NEXT: {{^}}"a.b"() {x = tensor<4xf32} : () -> (){{$}}
// CHECK-NEXT: {{^}}                      ^{{$}}
"a.b"() {x = tensor<4xf32} : () -> ()

// -----

// garbled: an extra closing brace
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:1: error: expected an operation or end of input, found '}'
// CHECK-NEXT: {{^}}}{{$}}
// CHECK-NEXT: {{^}}^{{$}}
module {
}
}

// -----

// garbled: a bare '@'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:15: error: expected a string or a token, found '}'
// CHECK-NEXT: {{^}}"a.b"() {x = @} : () -> (){{$}}
// CHECK-NEXT: {{^}}              ^{{$}}
"a.b"() {x = @} : () -> ()

// -----

// garbled: trailing comma in an array
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:20: error: expected an attribute, found ']'
// CHECK-NEXT: {{^}}"a.b"() {x = [1, 2,]} : () -> (){{$}}
// CHECK-NEXT: {{^}}                   ^{{$}}
"a.b"() {x = [1, 2,]} : () -> ()

// -----

// garbled: unbalanced dialect attribute body
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:14: error: expected a string or a symbol or a token or an attribute dictionary, found '#'
// CHECK-NEXT: {{^}}"a.b"() {x = #foo<a<b>} : () -> (){{$}}
// CHECK-NEXT: {{^}}             ^{{$}}
"a.b"() {x = #foo<a<b>} : () -> ()

// -----

// garbled: op name without a dialect
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:1: error: op name 'a' must be 'dialect.op'
// CHECK-NEXT: {{^}}"a"() : () -> (){{$}}
// CHECK-NEXT: {{^}}^{{$}}
"a"() : () -> ()

// -----

// garbled: unknown custom op
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:1: error: custom op 'foo.bar' is unknown (the generic form "foo.bar"(...) is accepted for unregistered ops)
// CHECK-NEXT: {{^}}foo.bar{{$}}
// CHECK-NEXT: {{^}}^{{$}}
foo.bar

// -----

// garbled: a result pack of zero
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:4: error: result pack count must be between 1 and 4096
// CHECK-NEXT: {{^}}%0:0 = "a.b"() : () -> (){{$}}
// CHECK-NEXT: {{^}}   ^{{$}}
%0:0 = "a.b"() : () -> ()

// -----

// garbled: block argument without a type
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:6: error: expected a token, found '%'
// CHECK-NEXT: {{^}}^bb0(%x):{{$}}
// CHECK-NEXT: {{^}}     ^{{$}}
"func.func"() ({
^bb0(%x):
  func.return
}) : () -> ()

// -----

// garbled: block label without ':'
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:10: error: expected a token or a type, found 'i'
// CHECK-NEXT: {{^}}^bb0(%x: i32){{$}}
// CHECK-NEXT: {{^}}         ^{{$}}
"func.func"() ({
^bb0(%x: i32)
  func.return
}) : () -> ()

// -----

// garbled: successor without '^'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:10: error: expected a block, found 'b'
// CHECK-NEXT: {{^}}"a.b"() [bb1] : () -> (){{$}}
// CHECK-NEXT: {{^}}         ^{{$}}
"a.b"() [bb1] : () -> ()

// -----

// garbled: two symbol names on a module
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:11: error: expected a region, found symbol '@n'
// CHECK-NEXT: {{^}}module @m @n {{{$}}
// CHECK-NEXT: {{^}}          ^{{$}}
module @m @n {
}

// -----

// garbled: missing ',' between custom operands
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:22: error: expected ',', found value '%a'
// CHECK-NEXT: {{^}}  %0 = arith.addi %a %a : i32{{$}}
// CHECK-NEXT: {{^}}                     ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a %a : i32
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// garbled: trailing ',' in a custom operand list
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:17: error: expected ':', found ','
// CHECK-NEXT: {{^}}  func.return %a, : i32{{$}}
// CHECK-NEXT: {{^}}                ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  func.return %a, : i32
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// garbled: too many types in a custom op
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:23: error: unexpected ',' in 'func.return'
// CHECK-NEXT: {{^}}  func.return %a : i32, i32{{$}}
// CHECK-NEXT: {{^}}                      ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  func.return %a : i32, i32
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// garbled: custom op missing its type
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:25: error: expected ':'
// CHECK-NEXT: {{^}}  %0 = arith.addi %a, %a{{$}}
// CHECK-NEXT: {{^}}                        ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a, %a
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// columns count characters, not bytes
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:37: error: expected a token or an operation or end of input, found '%'
// CHECK-NEXT: {{^}}"test.x"() {s = "héllo"} : () -> () %z{{$}}
// CHECK-NEXT: {{^}}                                    ^{{$}}
"test.x"() {s = "héllo"} : () -> () %z

// -----

// tabs are kept in the caret line
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:9: error: use of undeclared SSA value name '%q'
// CHECK-NEXT: {{^}}		"a.b"(%q) : () -> (){{$}}
// CHECK-NEXT: {{^}}		      ^{{$}}
		"a.b"(%q) : () -> ()

// -----

// wrongly typed: float literal with an integer type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:34: error: float literal with non-float type 'i32'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1.5 : i32} : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                 ^{{$}}
%0 = "arith.constant"() {value = 1.5 : i32} : () -> i32

// -----

// wrongly typed: integer of width 0
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:38: error: integer width out of range
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i0} : () -> i0{{$}}
// CHECK-NEXT: {{^}}                                     ^{{$}}
%0 = "arith.constant"() {value = 1 : i0} : () -> i0

// -----

// wrongly typed: integer literal out of range
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:34: error: integer out of range
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 99999999999999999999} : () -> i64{{$}}
// CHECK-NEXT: {{^}}                                 ^{{$}}
%0 = "arith.constant"() {value = 99999999999999999999} : () -> i64

// -----

// wrongly typed: two result names for one result
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:10: error: operation 'arith.constant' defines 1 results but 2 names were given
// CHECK-NEXT: {{^}}%0, %1 = "arith.constant"() {value = 1 : i32} : () -> (i32){{$}}
// CHECK-NEXT: {{^}}         ^{{$}}
%0, %1 = "arith.constant"() {value = 1 : i32} : () -> (i32)

// -----

// wrongly typed: duplicate attribute
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:43: error: duplicate attribute 'value'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32, value = 2 : i32} : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                          ^{{$}}
%0 = "arith.constant"() {value = 1 : i32, value = 2 : i32} : () -> i32

// -----

// wrongly typed: operands and function type disagree in number
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:11: error: 0 operands present, but the function type has 1 inputs
// CHECK-NEXT: {{^}}"a.b"() : (i32) -> (){{$}}
// CHECK-NEXT: {{^}}          ^{{$}}
"a.b"() : (i32) -> ()

// -----

// wrongly typed: operand type differs from the function type
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:23: error: operand #0 has type 'i32', but the function type says 'f32'
// CHECK-NEXT: {{^}}  "func.return"(%a) : (f32) -> (){{$}}
// CHECK-NEXT: {{^}}                      ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  "func.return"(%a) : (f32) -> ()
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// wrongly typed: not a function type after ':'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:11: error: expected a type, found 'f'
// CHECK-NEXT: {{^}}"a.b"() : f32{{$}}
// CHECK-NEXT: {{^}}          ^{{$}}
"a.b"() : f32

// -----

// wrongly typed: custom op type differs from its operand
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:23: error: operand type 'f32' does not match the type 'i32' of the value
// CHECK-NEXT: {{^}}  func.return %a : f32{{$}}
// CHECK-NEXT: {{^}}                      ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  func.return %a : f32
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// wrongly typed: redefinition of an SSA value
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:15: error: redefinition of SSA value '%x'
// CHECK-NEXT: {{^}}^bb0(%x: i32, %x: i32):{{$}}
// CHECK-NEXT: {{^}}              ^{{$}}
"a.b"() ({
^bb0(%x: i32, %x: i32):
  "a.c"() : () -> ()
}) : () -> ()

// -----

// wrongly typed: an isolated region does not see outer values
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:17: error: use of undeclared SSA value name '%c'
// CHECK-NEXT: {{^}}  "func.return"(%c) : (i32) -> (){{$}}
// CHECK-NEXT: {{^}}                ^{{$}}
%c = "arith.constant"() {value = 1 : i32} : () -> i32
"func.func"() ({
  "func.return"(%c) : (i32) -> ()
}) {sym_name = "f", function_type = () -> i32} : () -> ()

// -----

// two custom-form ops on one line: an op ends at the end of its line, so the second op's name
// is named (it said "use of undeclared SSA value name '%a'")
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:47: error: 'commir.store' starts another op on the line of 'commir.load': a custom-form op ends at the end of its line; put each op on a line of its own
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32> commir.store %a into @Y[@i] : !commir.tile<f32>
}
