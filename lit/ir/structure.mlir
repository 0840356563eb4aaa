// Structure as the LangRef defines it: result groups (`%r:2`, `%r#1`), results of several
// names, forward references in graph regions of unregistered ops, properties of an
// unregistered op, a region of one empty block, blocks with successors and arguments,
// custom-form ops spanning lines, ops without a dialect prefix. What we print reads back in
// upstream mlir-opt as the same IR.
// RUN: %mercury-opt --allow-unregistered-dialect %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic > %t.ours
// RUN: %mlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt --allow-unregistered-dialect %s | FileCheck %s

// CHECK: %r:2 = "test.two"() : () -> (i32, f32)
// CHECK: "test.use"(%r#1, %r#0) : (f32, i32) -> ()
%r:2 = "test.two"() : () -> (i32, f32)
"test.use"(%r#1, %r#0) : (f32, i32) -> ()
// CHECK: %a, %b = "test.pair"() : () -> (i8, i8)
%a, %b = "test.pair"() : () -> (i8, i8)
// CHECK: "test.props"() <{p = 1 : i32, q = "x"}> {d = 2} : () -> ()
"test.props"() <{p = 1 : i32, q = "x"}> {d = 2} : () -> ()
// CHECK: "test.empty"() ({
// CHECK-NEXT: ^bb0:
// CHECK-NEXT: }) : () -> ()
"test.empty"() ({
^bb0:
}) : () -> ()
"test.none"() ({}) : () -> ()
// A graph region: a use before its definition.
"test.graph"() ({
  "test.use"(%later) : (i32) -> ()
  %later = "test.def"() : () -> i32
}) : () -> ()
"test.cfg"() ({
  %c = "test.def"() : () -> i1
  "test.cond_br"(%c)[^then, ^else] : (i1) -> ()
^then:
  "test.br"(%c)[^join] : (i1) -> ()
^else:
  "test.br"(%c)[^join] : (i1) -> ()
^join(%j: i1):
  "test.use"(%c, %j) : (i1, i1) -> ()
  "test.return"() : () -> ()
}) : () -> ()
"nodialect"() : () -> ()
func.func @spanning(%x: i32, %y: i32) -> i32 {
  %s = arith.addi
         %x,
         %y
       : i32
  // Two ops on one line are two ops: each custom form ends where its syntax ends.
  %t = arith.muli %s, %s : i32 %u = arith.subi %t, %x : i32
  return %u : i32
}
