// A ',' stands between passes: a leading, doubled or trailing one is refused where it is (they
// were accepted; mlir-opt refuses them), and an option past usize says it is too large (it was
// "must be a non-negative integer"). New-user pass, 2026-12-03.
// RUN: %exit-status %mercury-opt %repo/examples/small/attention.mlir --pass-pipeline='builtin.module(tile{axis=i factor=2},)' 2>&1 | FileCheck %s --check-prefix=TRAIL
// TRAIL: <pass-pipeline>:1:37: error: expected a pass name after ','
// TRAIL: exit status 1
// RUN: %exit-status %mercury-opt %repo/examples/small/attention.mlir --pass-pipeline='builtin.module(,tile{axis=i factor=2})' 2>&1 | FileCheck %s --check-prefix=LEAD
// LEAD: <pass-pipeline>:1:16: error: expected a pass name before ','
// RUN: %exit-status %mercury-opt %repo/examples/small/attention.mlir --pass-pipeline='builtin.module(tile{axis=i factor=2},,tile{axis=j factor=2})' 2>&1 | FileCheck %s --check-prefix=DOUBLE
// DOUBLE: <pass-pipeline>:1:38: error: expected a pass name between the ','s
// RUN: %exit-status %mercury-opt %repo/examples/small/attention.mlir --pass-pipeline='builtin.module(tile{axis=i factor=18446744073709551616})' 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: error: pass 'tile': option 'factor' is too large: 18446744073709551616 (at most 18446744073709551615)
