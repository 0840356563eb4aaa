// Input from a file, from standard input (`-` or no argument), output to -o; empty input is
// an empty module; invalid UTF-8 is a located error.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt - < %s | FileCheck %s
// RUN: %mercury-opt < %s | FileCheck %s
// RUN: %mercury-opt %s -o %t.out && FileCheck %s < %t.out
// RUN: %mercury-opt -o %t.out2 %s --canonicalize && FileCheck %s < %t.out2
// RUN: %mercury-opt - < %s 2>&1 | FileCheck %s --check-prefix=QUIET
// QUIET-NOT: error
// CHECK: module {
// CHECK-NEXT: func.func @io() {
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK-NEXT: }
"func.func"() ({
  func.return
}) {sym_name = "io", function_type = () -> ()} : () -> ()

// Diagnostics on standard input are attributed to <stdin>.
// RUN: cat %S/Inputs/missing-value.mlir | not %mercury-opt 2>&1 | FileCheck %s --check-prefix=STDIN
// STDIN: <stdin>:1:6: error: 'arith.constant' op requires attribute 'value'

// RUN: printf '' | %mercury-opt | FileCheck %s --check-prefix=EMPTY
// RUN: printf '// only a comment\n\n' | %mercury-opt | FileCheck %s --check-prefix=EMPTY
// EMPTY: module {
// EMPTY-NEXT: }

// RUN: printf '"a.b"() {s = "ok"} : () -> ()\n"a.b"() {s = "\xff\xfe"} : () -> ()\n' | not %mercury-opt --allow-unregistered-dialect 2>&1 | FileCheck %s --check-prefix=UTF8
// UTF8: <stdin>:2:15: error: the input is not valid UTF-8

// An output file is not written when the input has errors.
// RUN: rm -f %t.bad
// RUN: printf '"x' | not %mercury-opt -o %t.bad
// RUN: not test -e %t.bad
// Nor is an older one left behind (as mlir-opt, which keeps its output only on success): a
// build step would take it for this run's. `-o` naming the input itself keeps the input.
// RUN: echo stale > %t.bad && printf '"x' | not %mercury-opt -o %t.bad
// RUN: not test -e %t.bad
// RUN: printf '"x' > %t.self.mlir && not %mercury-opt %t.self.mlir -o %t.self.mlir 2> /dev/null
// RUN: test -s %t.self.mlir

// A write that fails is said and exits 1 (it exited 1 with no message); mercury-run's report
// to a full disk was lost and the run exited 0 (thirteenth new-user pass).
// (The shell opens /dev/full: lit would read a failed command's redirected files, forever.)
// RUN: not sh -c "%mercury-opt %s > /dev/full" 2> %t.full; FileCheck %s --check-prefix=FULL < %t.full
// FULL: mercury-opt: error: could not write standard output: No space left on device
// RUN: not %mercury-opt --mlir-print-op-generic --emit=plan %s 2>&1 | FileCheck %s --check-prefix=GENERIC
// GENERIC: mercury-opt: error: --mlir-print-op-generic prints CommIR, and --emit=plan prints none
// RUN: not %mercury-opt --split-input-file --emit=plan %s 2>&1 | FileCheck %s --check-prefix=SPLITPLAN
// SPLITPLAN: --split-input-file with --emit=plan would join JSON documents by '{{//}} -----' (not JSON)
