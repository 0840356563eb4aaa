// A UTF-8 byte-order mark at the start of an IR file is skipped (some editors write one); it
// was refused as "expected a token, found '<invisible>'". Locations count columns without it.
// RUN: printf '\357\273\277' > %t.mlir && cat %s >> %t.mlir
// RUN: %mercury-opt %t.mlir | FileCheck %s
// CHECK: commir.mesh @m shape [2]
// RUN: printf '\357\273\277commir.kernel\n' > %t.bad.mlir
// RUN: not %mercury-opt %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: .bad.mlir:1:14: error: expected attribute 'sym_name'
commir.mesh @m shape [2]
