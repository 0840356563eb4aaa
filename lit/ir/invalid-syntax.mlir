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
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:57: error: expected '=' after SSA name
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32} : () -> i32 %1{{$}}
// CHECK-NEXT: {{^}}                                                        ^{{$}}
%0 = "arith.constant"() {value = 1 : i32} : () -> i32 %1

// -----

// truncated: the result type is missing at the end of the input
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:50: error: expected non-function type
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32} : () ->{{$}}
// CHECK-NEXT: {{^}}                                                 ^{{$}}
%0 = "arith.constant"() {value = 1 : i32} : () ->

// -----

// truncated: no function type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:42: error: expected ':' followed by operation type
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32}{{$}}
// CHECK-NEXT: {{^}}                                         ^{{$}}
%0 = "arith.constant"() {value = 1 : i32}

// -----

// truncated: unclosed attribute dictionary
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:41: error: expected ',' or '}'
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32 : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                        ^{{$}}
%0 = "arith.constant"() {value = 1 : i32 : () -> i32

// -----

// truncated: unclosed region
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:19: error: expected '}' to end a region
// CHECK-NEXT: {{^}}  "func.func"() ({{{$}}
// CHECK-NEXT: {{^}}                  ^{{$}}
module {
  "func.func"() ({

// -----

// truncated: a result name and nothing else
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:5: error: expected operation name in quotes
// CHECK-NEXT: {{^}}%0 ={{$}}
// CHECK-NEXT: {{^}}    ^{{$}}
%0 =

// -----

// truncated: a custom op without operands
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:16: error: expected SSA operand
// CHECK-NEXT: {{^}}%0 = arith.addi{{$}}
// CHECK-NEXT: {{^}}               ^{{$}}
%0 = arith.addi

// -----

// truncated: unterminated string
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:39: error: expected '"' in string literal
// CHECK-NEXT: {{^}}"a.b"() {x = "unterminated} : () -> (){{$}}
// CHECK-NEXT: {{^}}                                      ^{{$}}
"a.b"() {x = "unterminated} : () -> ()

// -----

// truncated: unclosed tensor type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:26: error: expected '>' in tensor type
// CHECK-NEXT: {{^}}"a.b"() {x = tensor<4xf32} : () -> (){{$}}
// CHECK-NEXT: {{^}}                         ^{{$}}
"a.b"() {x = tensor<4xf32} : () -> ()

// -----

// garbled: an extra closing brace
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:2: error: expected operation name in quotes
// CHECK-NEXT: {{^}}}{{$}}
// CHECK-NEXT: {{^}} ^{{$}}
module {
}
}

// -----

// garbled: a bare '@'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:14: error: @ identifier expected to start with letter or '_'
// CHECK-NEXT: {{^}}"a.b"() {x = @} : () -> (){{$}}
// CHECK-NEXT: {{^}}             ^{{$}}
"a.b"() {x = @} : () -> ()

// -----

// garbled: trailing comma in an array
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:20: error: expected attribute value
// CHECK-NEXT: {{^}}"a.b"() {x = [1, 2,]} : () -> (){{$}}
// CHECK-NEXT: {{^}}                   ^{{$}}
"a.b"() {x = [1, 2,]} : () -> ()

// -----

// garbled: unbalanced dialect attribute body
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:23: error: unbalanced '}' character in pretty dialect name
// CHECK-NEXT: {{^}}"a.b"() {x = #foo<a<b>} : () -> (){{$}}
// CHECK-NEXT: {{^}}                      ^{{$}}
"a.b"() {x = #foo<a<b>} : () -> ()

// -----

// garbled: unknown custom op
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:1: error: Dialect `foo' not found for custom op 'foo.bar'
// CHECK-NEXT: {{^}}foo.bar{{$}}
// CHECK-NEXT: {{^}}^{{$}}
foo.bar

// -----

// garbled: a result pack of zero
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:4: error: expected named operation to have at least 1 result
// CHECK-NEXT: {{^}}%0:0 = "a.b"() : () -> (){{$}}
// CHECK-NEXT: {{^}}   ^{{$}}
%0:0 = "a.b"() : () -> ()

// -----

// garbled: block argument without a type
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:8: error: expected ':' and type for SSA operand
// CHECK-NEXT: {{^}}^bb0(%x):{{$}}
// CHECK-NEXT: {{^}}       ^{{$}}
"func.func"() ({
^bb0(%x):
  func.return
}) : () -> ()

// -----

// garbled: block label without ':'
// CHECK: invalid-syntax.mlir:[[@LINE+4]]:14: error: expected ':' after block name
// CHECK-NEXT: {{^}}^bb0(%x: i32){{$}}
// CHECK-NEXT: {{^}}             ^{{$}}
"func.func"() ({
^bb0(%x: i32)
  func.return
}) : () -> ()

// -----

// garbled: successor without '^'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:10: error: expected block name
// CHECK-NEXT: {{^}}"a.b"() [bb1] : () -> (){{$}}
// CHECK-NEXT: {{^}}         ^{{$}}
"a.b"() [bb1] : () -> ()

// -----

// garbled: two symbol names on a module
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:10: error: expected a region, found '@n'
// CHECK-NEXT: {{^}}module @m @n {{{$}}
// CHECK-NEXT: {{^}}         ^{{$}}
module @m @n {
}

// -----

// garbled: missing ',' between custom operands
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:21: error: expected ','
// CHECK-NEXT: {{^}}  %0 = arith.addi %a %a : i32{{$}}
// CHECK-NEXT: {{^}}                    ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a %a : i32
  func.return
}) {sym_name = "f", function_type = (i32) -> ()} : () -> ()

// -----

// garbled: trailing ',' in a custom operand list
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:18: error: expected SSA operand
// CHECK-NEXT: {{^}}  func.return %a, : i32{{$}}
// CHECK-NEXT: {{^}}                 ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  func.return %a, : i32
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// garbled: too many types in a custom op
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:28: error: 1 operands present, but expected 2
// CHECK-NEXT: {{^}}  func.return %a : i32, i32{{$}}
// CHECK-NEXT: {{^}}                           ^{{$}}
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
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:39: error: expected '=' after SSA name
// CHECK-NEXT: {{^}}"test.x"() {s = "héllo"} : () -> () %z{{$}}
// CHECK-NEXT: {{^}}                                      ^{{$}}
"test.x"() {s = "héllo"} : () -> () %z

// -----

// tabs are kept in the caret line
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:15: error: expected 1 operand type but had 0
// CHECK-NEXT: {{^}}		"a.b"(%q) : () -> (){{$}}
// CHECK-NEXT: {{^}}		            ^{{$}}
		"a.b"(%q) : () -> ()

// -----

// wrongly typed: float literal with an integer type
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:34: error: floating point value not valid for specified type
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1.5 : i32} : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                 ^{{$}}
%0 = "arith.constant"() {value = 1.5 : i32} : () -> i32

// -----

// wrongly typed: integer of width 0
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:34: error: integer constant out of range for attribute
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i0} : () -> i0{{$}}
// CHECK-NEXT: {{^}}                                 ^{{$}}
%0 = "arith.constant"() {value = 1 : i0} : () -> i0

// -----

// wrongly typed: integer literal out of range
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:34: error: integer constant out of range for attribute
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 99999999999999999999} : () -> i64{{$}}
// CHECK-NEXT: {{^}}                                 ^{{$}}
%0 = "arith.constant"() {value = 99999999999999999999} : () -> i64

// -----

// wrongly typed: two result names for one result
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:1: error: operation defines 1 results but was provided 2 to bind
// CHECK-NEXT: {{^}}%0, %1 = "arith.constant"() {value = 1 : i32} : () -> (i32){{$}}
// CHECK-NEXT: {{^}}^{{$}}
%0, %1 = "arith.constant"() {value = 1 : i32} : () -> (i32)

// -----

// wrongly typed: duplicate attribute
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:43: error: duplicate key 'value' in dictionary attribute
// CHECK-NEXT: {{^}}%0 = "arith.constant"() {value = 1 : i32, value = 2 : i32} : () -> i32{{$}}
// CHECK-NEXT: {{^}}                                          ^{{$}}
%0 = "arith.constant"() {value = 1 : i32, value = 2 : i32} : () -> i32

// -----

// wrongly typed: operands and function type disagree in number
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:11: error: expected 0 operand types but had 1
// CHECK-NEXT: {{^}}"a.b"() : (i32) -> (){{$}}
// CHECK-NEXT: {{^}}          ^{{$}}
"a.b"() : (i32) -> ()

// -----

// wrongly typed: operand type differs from the function type
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:17: error: use of value '%a' expects different type than prior uses: 'f32' vs 'i32'
// CHECK-NEXT: {{^}}  "func.return"(%a) : (f32) -> (){{$}}
// CHECK-NEXT: {{^}}                ^{{$}}
"func.func"() ({
^bb0(%a: i32):
  "func.return"(%a) : (f32) -> ()
}) {sym_name = "f", function_type = (i32) -> i32} : () -> ()

// -----

// wrongly typed: not a function type after ':'
// CHECK: invalid-syntax.mlir:[[@LINE+3]]:11: error: expected function type
// CHECK-NEXT: {{^}}"a.b"() : f32{{$}}
// CHECK-NEXT: {{^}}          ^{{$}}
"a.b"() : f32

// -----

// wrongly typed: custom op type differs from its operand
// CHECK: invalid-syntax.mlir:[[@LINE+5]]:15: error: use of value '%a' expects different type than prior uses: 'f32' vs 'i32'
// CHECK-NEXT: {{^}}  func.return %a : f32{{$}}
// CHECK-NEXT: {{^}}              ^{{$}}
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

// wrongly typed: an op isolated from above does not use outer values (the parser resolves
// the name, the verifier refuses the use, as upstream's)
// CHECK: invalid-syntax.mlir:[[@LINE+6]]:3: error: 'func.return' op using value defined outside the region
// CHECK-NEXT: {{^}}  "func.return"(%c) : (i32) -> (){{$}}
// CHECK-NEXT: {{^}}  ^{{$}}
// CHECK-NEXT: invalid-syntax.mlir:[[@LINE+2]]:1: note: required by region isolation constraints
%c = "arith.constant"() {value = 1 : i32} : () -> i32
"func.func"() ({
  "func.return"(%c) : (i32) -> ()
}) {sym_name = "f", function_type = () -> i32} : () -> ()
