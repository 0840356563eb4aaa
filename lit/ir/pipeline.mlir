// Pass flags run in command-line order; --pass-pipeline runs its list in order;
// --mlir-print-ir-after-all prints the IR after each pass to stderr.
// RUN: %mercury-opt --symbol-dce --canonicalize --mlir-print-ir-after-all %s 2>&1 >/dev/null | FileCheck %s --check-prefix=FLAGS
// RUN: %mercury-opt --canonicalize --symbol-dce --canonicalize --mlir-print-ir-after-all %s 2>&1 >/dev/null | FileCheck %s --check-prefix=REPEAT
// RUN: %mercury-opt --pass-pipeline='builtin.module(canonicalize, symbol-dce)' --mlir-print-ir-after-all %s 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
// RUN: %mercury-opt --pass-pipeline='builtin.module(canonicalize,symbol-dce)' %s | FileCheck %s --check-prefix=OUT
// RUN: %mercury-opt --pass-pipeline='canonicalize,symbol-dce' %s | FileCheck %s --check-prefix=OUT
// RUN: %mercury-opt --verify-each=false --canonicalize %s | FileCheck %s --check-prefix=OUT
// An empty pipeline runs nothing.
// RUN: %mercury-opt --pass-pipeline='builtin.module()' --mlir-print-ir-after-all %s 2>&1 | FileCheck %s --check-prefix=NONE

// FLAGS: // -----// IR Dump After symbol-dce //----- //
// FLAGS-NEXT: module {
// FLAGS: arith.addi
// FLAGS: // -----// IR Dump After canonicalize //----- //
// FLAGS-NEXT: module {
// FLAGS-NOT: arith.addi
// FLAGS-NOT: IR Dump

// REPEAT: IR Dump After canonicalize
// REPEAT: IR Dump After symbol-dce
// REPEAT: IR Dump After canonicalize
// REPEAT-NOT: IR Dump

// PIPE: IR Dump After canonicalize
// PIPE-NOT: arith.addi
// PIPE: IR Dump After symbol-dce
// PIPE-NOT: IR Dump

// OUT: module {
// OUT-NOT: arith.addi
// OUT-NOT: "dead"
// OUT: func.func @main

// NONE-NOT: IR Dump
// NONE: arith.addi
"func.func"() ({
^bb0(%a: i32):
  %unused = arith.addi %a, %a : i32
  func.return
}) {sym_name = "main", function_type = (i32) -> ()} : () -> ()
"func.func"() ({
  func.return
}) {sym_name = "dead", sym_visibility = "private", function_type = () -> ()} : () -> ()
