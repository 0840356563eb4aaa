// Ulysses with K/V head replication (4 key/value heads on 8 ranks, mesh [4, 2]): queries and
// outputs travel all-to-all; each key/value head reaches the 2 ranks of its group point to
// point (7/8 of each rank's K rows, not a whole-tensor gather); the search generates the same
// script as its candidate `mesh 4x2: L0=heads L1=groups`.
// RUN: %mercury-opt --schedule=%repo/examples/schedules/ulysses_kv_replicated.sched --commir-print-comm-plan %repo/examples/attention_gqa_kv4.mlir | FileCheck %s
// CHECK-DAG: //   @Q: all_to_all, 8 ops in 1 stages
// CHECK-DAG: //   @K: p2p (reshard), 56 ops in 1 stages, 56.0 MiB sent in total
// CHECK-DAG: //   @V: p2p (reshard), 56 ops in 1 stages, 56.0 MiB sent in total
// CHECK: commir.reshard @Q to [R, S(0, 1), R, R]
// CHECK: commir.reshard @K to [R, S(0), R, R]
// CHECK: commir.for @hk0 parallel(0) {
// CHECK: commir.for @g1 parallel(1) {
// REQUIRES: mercury-tune
// RUN: %mercury-tune %repo/examples/attention_gqa_kv4.mlir --topology h200-1x8 --out %t.tune > /dev/null
// RUN: grep -v '^#' %repo/examples/schedules/ulysses_kv_replicated.sched > %t.script
// RUN: sed -n '3,$p' %t.tune/templates/mesh_4x2__L0_heads_L1_groups.transform | diff - %t.script
