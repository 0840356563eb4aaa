// A kernel with no output computes nothing: the user's input, refused at the kernel with a
// located error. It failed in the lowering as "internal error: the lowered plan is invalid: the
// plan has no output buffer" (and before that ran nothing and exited 0; a new-user run).
// RUN: %exit-status %mercury-opt --emit=plan %s 2>&1 | FileCheck %s
// RUN: %if mercury-run %{ %exit-status %mercury-run %s --backend cpu 2>&1 | FileCheck %s %}
// CHECK: kernel-no-output.mlir:15:1: error: kernel '@nothing' has no output: nothing to compute; declare a buffer 'out' and store or reduce into it
// CHECK-NOT: internal error
// CHECK: exit status 1
// An output declared but never written is refused at its declaration (as before).
// RUN: %exit-status %mercury-opt --emit=plan %S/Inputs/output-not-stored.mlir 2>&1 | FileCheck %s --check-prefix=UNSTORED
// UNSTORED: output-not-stored.mlir:6:3: error: the schedule produces 0 of the 1024 elements of rank [0]'s part [0:1024] of '@C'
// UNSTORED: exit status 1

commir.mesh @mesh shape [4] names ["gpu"]
commir.kernel @nothing on @mesh {
  commir.axis @i = 4096 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
}
