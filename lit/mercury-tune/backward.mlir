// mercury-tune ranks the candidates of an attention backward kernel (examples/attention_bwd.mlir,
// causal MHA, B1 H32 S32K D128 on 8 H100s): attention's roles plus ring-flash-attn's ring
// (`ring+carry`, dK/dV accumulators travelling with K/V), each also zigzag. The cost model prices
// the backward patch at the backward's rate (2.5x the forward's FLOPs, the measured
// backward/forward rate ratio) and the dK/dV partials' transfers and adds of each plan.
// REQUIRES: mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %repo/examples/attention_bwd.mlir --kernel attention_bwd --topology h100-1x8 --out %t/mha | FileCheck %s
// CHECK: chosen: mesh 8: L0=heads
// CHECK: searched: 12 seen, 0 invalid, 0 over memory, 12 simulated
// RUN: FileCheck %s --check-prefix=RANK < %t/mha/tuning-report.md
// Balanced rings beat the contiguous ones on a causal kernel; ring-flash-attn's ring is priced
// beside shift-reduce's.
// RANK: | 1 | mesh 8: L0=heads |
// RANK-DAG: mesh 8: L0=ring+carry zigzag | {{[0-9.]+}} ms
// RANK-DAG: mesh 8: L0=ring zigzag | {{[0-9.]+}} ms
// RANK-DAG: mesh 8: L0=ring | {{[0-9.]+}} ms
// RANK-DAG: mesh 8: L0=ring+carry | {{[0-9.]+}} ms
// The chosen schedule runs and equals the single-device backward (the CPU on the small
// operator's same-named kernel).
// RUN: %mercury-tune %repo/examples/small/attention_bwd.mlir --kernel attention_bwd --topology h100-1x8 --out %t/small | FileCheck %s --check-prefix=SMALL
// SMALL: chosen: mesh 8: L0=
// RUN: %mercury-run %repo/examples/small/attention_bwd.mlir --kernel attention_bwd --schedule %t/small/schedule.transform --backend cpu --check | FileCheck %s --check-prefix=EXEC
// EXEC-DAG: check @dQ: relative error {{.*}} ok
// EXEC-DAG: check @dK: relative error {{.*}} ok
// EXEC-DAG: check @dV: relative error {{.*}} ok
