// The Llama-3 decoder layer (examples/small/llama3_layer.mlir, 8 kernels on 8 ranks) run as one
// module on the CPU executor under the shipped layer schedules, every kernel's outputs checked
// in f64 against the single-device module (each kernel on the single-device outputs of the
// kernels before it).
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/small/llama3_layer.mlir --module --schedule %repo/examples/schedules/llama3_layer_cp.sched --backend cpu --check | FileCheck %s --check-prefixes=CHECK,CP
// RUN: %mercury-run %repo/examples/small/llama3_layer.mlir --module --schedule %repo/examples/schedules/llama3_layer_tp.sched --backend cpu --check | FileCheck %s --check-prefixes=CHECK,TP
// RUN: %mercury-run %repo/examples/small/llama3_layer.mlir --module --schedule %repo/examples/schedules/llama3_layer_ulysses.sched --backend cpu --check | FileCheck %s --check-prefixes=CHECK,UL
//
// CP: // comm-plan @attn_norm: mesh [8], 8 ranks
// CP-NEXT: //   no communication
// CP: // comm-plan @attention: mesh [8], 8 ranks
// CP-DAG: //   @K: ring p2p, 56 ops in 7 stages
// CP-DAG: //   @V: ring p2p, 56 ops in 7 stages
// CP: // comm-plan @o_proj
// CP-NEXT: //   no communication
// UL: // comm-plan @attention: mesh [8], 8 ranks
// UL-DAG: //   @K: all_to_all, 8 ops in 1 stages
// UL-DAG: //   @O: all_to_all, 8 ops in 1 stages
// UL-DAG: //   @Q: all_to_all, 8 ops in 1 stages
// UL-DAG: //   @V: all_to_all, 8 ops in 1 stages
// UL: // comm-plan @o_proj
// UL-NEXT: //   no communication
// Megatron's TP+SP: Q/K/V/O split by heads and Z by the hidden dim between the kernels
// (place-edge), so attention moves nothing; the projections all-gather the tokens and the
// output and down projections reduce-scatter onto them.
// TP: // comm-plan @qkv_rope: mesh [8], 8 ranks
// TP: //   @Xn: all_gather, 8 ops in 1 stages
// TP: edge @Q: from @qkv_rope, placed alike ('sharding [R, S(0), R, R]'): nothing moves
// TP: // comm-plan @attention: mesh [8], 8 ranks
// TP-NEXT: //   no communication
// TP: edge @O: from @attention, placed alike ('sharding [R, S(0), R, R]'): nothing moves
// TP: // comm-plan @o_proj
// TP-NEXT: //   @A: reduce_scatter(add), 8 ops in 1 stages
// TP-NEXT: // memory @o_proj
// TP: // comm-plan @gate_up
// TP-NEXT: //   @Hn: all_gather, 8 ops in 1 stages
// TP: edge @Z: from @gate_up, placed alike ('sharding [R, R, S(0)]'): nothing moves
// TP: // comm-plan @down
// TP-NEXT: //   @D: reduce_scatter(add), 8 ops in 1 stages
// TP-NEXT: // memory @down
// CHECK: edge @H: from @ffn_norm, placed alike ('sharding [R, S(0), R]'): nothing moves
// CHECK: check of @attn_norm:
// CHECK: check @Xn: relative error {{.*}} ok
// CHECK: check of @qkv_rope:
// CHECK-DAG: check @Q: relative error {{.*}} ok
// CHECK-DAG: check @K: relative error {{.*}} ok
// CHECK-DAG: check @V: relative error {{.*}} ok
// CHECK: check of @attention:
// CHECK: check @O: relative error {{.*}} ok
// CHECK: check of @o_proj:
// CHECK: check @A: relative error {{.*}} ok
// CHECK: check of @ffn_norm:
// CHECK-DAG: check @H: relative error {{.*}} ok
// CHECK-DAG: check @Hn: relative error {{.*}} ok
// CHECK: check of @gate_up:
// CHECK: check @Z: relative error {{.*}} ok
// CHECK: check of @down:
// CHECK: check @D: relative error {{.*}} ok
// CHECK: check of @residual:
// CHECK: check @Y: every rank holds its shard as declared ('sharding [R, S(0), R]')  ok
// CHECK: check @Y: relative error {{.*}} ok
// CHECK-NOT: FAILED
