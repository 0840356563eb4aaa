// Ops of unknown dialects need --allow-unregistered-dialect; unknown ops of a registered
// dialect are always errors.
// RUN: not %mercury-opt %s 2>&1 | FileCheck %s --check-prefix=NOFLAG
// RUN: %mercury-opt --allow-unregistered-dialect %s | FileCheck %s --check-prefix=FLAG
// RUN: not %mercury-opt --allow-unregistered-dialect --split-input-file %S/Inputs/unknown-arith-op.mlir 2>&1 | FileCheck %s --check-prefix=ARITH

// NOFLAG: unregistered.mlir:[[@LINE+3]]:1: error: operation 'mydialect.op' belongs to the unregistered dialect 'mydialect' (use --allow-unregistered-dialect)
// FLAG: module {
// FLAG-NEXT: "mydialect.op"() {x = 1} : () -> ()
"mydialect.op"() {x = 1} : () -> ()

// ARITH: unknown-arith-op.mlir:1:1: error: unregistered operation 'arith.frobnicate' found in dialect ('arith') that does not allow unknown operations
