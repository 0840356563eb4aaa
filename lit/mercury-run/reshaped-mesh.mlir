// A schedule that re-shapes the mesh to another device count is checked against the declared
// placements re-expressed on the new mesh (as reshape-mesh re-expresses them), which it says,
// not refused after the run because the declared mesh has 8 ranks.
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/small/attention.mlir --schedule %S/Inputs/ring16.sched --backend cpu --check --seed 2 2>&1 | FileCheck %s
// CHECK: declared placement re-expressed on mesh [16]: @O 'sharding [R, R, S(0), R]' (declared 'sharding [R, R, S(0), R]' on mesh [8])
// CHECK: cpu: 16 ranks
// CHECK: check @O: every rank holds its shard as declared ('sharding [R, R, S(0), R]')  ok
// CHECK: check @O: relative error {{.*}} ok
// CHECK: check @O in its dtypes: relative error {{.*}} (tolerance 2e-2), largest element error {{.*}} of (rms + |want|) (at most 2e-1), 0 of 16384 elements rounded otherwise than the single-device plan  ok
