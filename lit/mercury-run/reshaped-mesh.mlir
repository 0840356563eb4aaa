// A schedule that re-shapes the mesh to another device count is checked against the declared
// placements re-expressed on the new mesh (as reshape-mesh re-expresses them), not refused
// after the run because the declared mesh has 8 ranks.
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/small/attention.mlir --schedule %S/Inputs/ring16.sched --backend cpu --check --seed 2 2>&1 | FileCheck %s
// CHECK: cpu: 16 ranks
// CHECK: check @O: every rank holds its shard as declared ('sharding [R, R, S(0), R]')  ok
// CHECK: check @O: relative error {{.*}} ok
