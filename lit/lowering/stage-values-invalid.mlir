// Each compute stage lowers one iteration's events, so a value computed in another stage is
// not there: a load outside a loop used inside it, or a value computed before an inner loop
// and used after it. Such an operand counted as masked out (a fully masked causal block) and
// its contribution was dropped: Y held only the first iteration's product (relative error
// 0.997 against numpy, exit 0; --check --self-reference passed it). It is refused at the op
// (StageCx::operands; tenth new-user pass, 2026-12-03).
// RUN: %exit-status %mercury-run %S/Inputs/stage-outer-value.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=OUTER
// OUTER: stage-outer-value.mlir:14:10: error: an operand of this op is computed in another stage of the plan: a value defined outside a loop and used inside it, or before an inner loop and used after it, is not supported; load or compute it inside the loop that uses it
// OUTER: exit status 1
// RUN: %exit-status %mercury-opt --emit=plan %S/Inputs/stage-after-inner-loop.mlir 2>&1 | FileCheck %s --check-prefix=AFTER
// AFTER: stage-after-inner-loop.mlir:21:10: error: an operand of this op is computed in another stage of the plan
// AFTER: exit status 1
