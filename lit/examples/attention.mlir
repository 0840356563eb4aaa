// The shipped example parses, verifies and prints to a fixed point in custom and generic
// form, and upstream mlir-opt 22 accepts its generic form against the CommIR IRDL definition.
// RUN: %mercury-opt %repo/examples/attention.mlir -o %t.custom
// RUN: %mercury-opt %t.custom -o %t.custom2
// RUN: diff %t.custom %t.custom2
// RUN: %mercury-opt --mlir-print-op-generic %repo/examples/attention.mlir -o %t.generic
// RUN: %mercury-opt %t.generic | diff %t.custom -
// RUN: %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir %t.generic -o /dev/null
// RUN: FileCheck %s < %t.custom

// CHECK: commir.mesh @mesh shape [8]
// CHECK: commir.kernel @attention on @mesh {
// CHECK: commir.patch "attention"
// CHECK: commir.reduce lse_merge
