// Every candidate refused: the error counts the refusals per distinct reason with one example
// each (new-user pass 5b: --refactor-mesh onto 6 or 12 devices printed one line of 28 KB /
// 820 KB listing every candidate's identical refusal).
// REQUIRES: mercury-tune
// RUN: %exit-status %mercury-tune %S/../../examples/ag_gemm.mlir --refactor-mesh \
// RUN:   --topology %S/Inputs/g6.toml --out %t 2>&1 | FileCheck %s --match-full-lines
// CHECK: mercury-tune: error: no usable schedule for CommIR kernel @ag_gemm from {{.*}}ag_gemm.mlir on g6: the source produced no candidate: 210 refused, 2 distinct reason(s):
// CHECK-NEXT:   200 x reshape-mesh{shape=NxN} cannot place the operator on mesh [N, N]: dimension N of '@A' (size N) does not divide into N shards; keep the me...
// CHECK-NEXT:       e.g. mesh 2x3 ["m", "m"]: reshape-mesh{shape=2x3} cannot place the operator on mesh [2, 3]: dimension 0 of '@A' (size 8192) does not divide into 6 shards; keep the mesh [8], or give a shape whose devices divide it
// CHECK-NEXT:   10 x reshape-mesh{shape=N} cannot place the operator on mesh [N]: dimension N of '@A' (size N) does not divide into N shards; keep the mesh [N...
// CHECK-NEXT:       e.g. mesh 6 ["m"]: reshape-mesh{shape=6} cannot place the operator on mesh [6]: dimension 0 of '@A' (size 8192) does not divide into 6 shards; keep the mesh [8], or give a shape whose devices divide it
// CHECK-NEXT: exit status 2

// So are profiled candidates that all fail their checked run (here: over the CPU executor's
// size limit): one line per reason, not one per candidate (an error of 26 KB).
// RUN: %exit-status %mercury-tune %S/../../examples/weighted_sum.mlir --topology h200-1x8 --refactor-mesh \
// RUN:   --profile-top 3 --backend cpu --out %t.p 2>&1 | FileCheck %s --check-prefix=PROFILE --match-full-lines
// PROFILE: mercury-tune: error: --profile-top: no candidate passed its checked run: 6 failed, 1 distinct reason(s):
// PROFILE-NEXT:   6 x run failed: the plan holds N elements, over the CPU executor's limit N
// PROFILE-NEXT:       e.g. mesh {{.*}}: run failed: the plan holds {{[0-9]+}} elements, over the CPU executor's limit {{[0-9]+}}
// PROFILE-NEXT: exit status 1
