// A private temp whose tile a shifted reduction sends to its owner inside an inner loop: the
// send of the next stage read the temp's one slot while that stage stored the next iteration's
// tile into it. The plan verifier refused it as an internal error (tenth new-user pass,
// 2026-12-03). A part that lies where the next stage writes is now copied into a
// double-buffered send slot (reduce.rs, stable_parts); numpy agrees (Y = sum_p exp(X[p]),
// relative error 5e-17).
// RUN: %mercury-run %S/Inputs/shift-reduce-private-temp.mlir --backend cpu --check --self-reference 2>&1 | FileCheck %s
// CHECK: @Y: partial p2p (shift-reduce)
// CHECK: check @Y: relative error {{.*}} ok
// RUN: %mercury-opt --emit=plan %S/Inputs/shift-reduce-private-temp.mlir | FileCheck %s --check-prefix=PLAN
// PLAN: "Y.send{{[01]}}_0.0"
