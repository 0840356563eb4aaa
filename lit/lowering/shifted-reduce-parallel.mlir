// A reduction whose index shifts a parallel axis by a sequential one (`(@j0 + @i0) mod 2`
// with @j0 parallel, @i0 sequential: a shift made under a parallel @i0 that single-device
// then made sequential) writes a different tile on each iteration, so both ranks hold
// partial sums of every dK and dV tile: they are all-reduced, like dQ (whose index does not
// use @j0). Found by the schedules fuzz target (seed 54563): the partials stayed apart and
// dK, dV were wrong with no error.
// REQUIRES: mercury-run
// RUN: %mercury-run --backend cpu %S/Inputs/attention-bwd-replicated.mlir --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},tile{axis=j factor=2 outer=j0 inner=j_t},parallelize{axis=i0 level=0 shard=false},shift{axis=j0 by=i0},single-device,reshape-mesh{shape=2},parallelize{axis=j0 level=0 shard=false})' --check 2>&1 | FileCheck %s
// CHECK-DAG: @dK: all_reduce(add)
// CHECK-DAG: @dQ: all_reduce(add)
// CHECK-DAG: @dV: all_reduce(add)
// CHECK-DAG: check @dK: relative error {{.*}} ok
// CHECK-DAG: check @dQ: relative error {{.*}} ok
// CHECK-DAG: check @dV: relative error {{.*}} ok
// CHECK-NOT: FAILED
