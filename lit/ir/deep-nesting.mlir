// Deeply nested input is an error, never a crash: the parser bounds nesting (128 levels of
// operations, attributes and types), and pest's own stack guard stops runaway recursion.
// RUN: %python %S/Inputs/nest.py region 100 closed > %t.ok.mlir
// RUN: %mercury-opt --allow-unregistered-dialect %t.ok.mlir | %mercury-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=OK
// OK-COUNT-100: "test.op"() ({
// RUN: %python %S/Inputs/nest.py region 129 closed > %t.129.mlir
// RUN: not %mercury-opt --allow-unregistered-dialect %t.129.mlir 2>&1 | FileCheck %s --check-prefix=LIMIT
// LIMIT: .mlir:129:1: error: nesting too deep: more than 128 levels of operations, attributes and types{{$}}
// RUN: %python %S/Inputs/nest.py array 129 closed > %t.array.mlir
// RUN: not %mercury-opt --allow-unregistered-dialect %t.array.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py tensor 129 closed > %t.tensor.mlir
// RUN: not %mercury-opt --allow-unregistered-dialect %t.tensor.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py dict 129 closed > %t.dict.mlir
// RUN: not %mercury-opt --allow-unregistered-dialect %t.dict.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: error: nesting too deep: more than 128 levels

// 100000 levels of each kind, closed or truncated:
// RUN: %python %S/Inputs/nest.py region 100000 > %t.1
// RUN: not %mercury-opt --allow-unregistered-dialect %t.1 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py region 100000 closed > %t.2
// RUN: not %mercury-opt --allow-unregistered-dialect %t.2 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py array 100000 > %t.3
// RUN: not %mercury-opt --allow-unregistered-dialect %t.3 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py tensor 100000 closed > %t.4
// RUN: not %mercury-opt --allow-unregistered-dialect %t.4 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py dict 100000 > %t.5
// RUN: not %mercury-opt --allow-unregistered-dialect %t.5 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py angle 100000 closed > %t.6
// RUN: not %mercury-opt --allow-unregistered-dialect %t.6 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python %S/Inputs/nest.py paren 100000 > %t.7
// RUN: not %mercury-opt --allow-unregistered-dialect %t.7 2>&1 | FileCheck %s --check-prefix=DEEP
