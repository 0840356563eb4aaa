// The tensor-parallel MLP (examples/mlp.mlir) under its schedules: Megatron (an all-gather of X
// before the GEMMs, a reduce-scatter of Y's bf16 partial sums after them) and the overlapped one (X blocks around
// the ring, partial Y blocks shifted to their owners), with GeLU and the cast to bf16 fused
// into the first gemm patch's epilogue, which writes the temp buffer @H directly.
// RUN: %mercury-opt --schedule=%repo/examples/schedules/mlp_megatron.sched --commir-print-comm-plan %repo/examples/mlp.mlir | FileCheck %s --check-prefix=TP
// RUN: %mercury-opt --schedule=%repo/examples/schedules/mlp_overlap.sched --commir-print-comm-plan %repo/examples/mlp.mlir | FileCheck %s --check-prefix=OVERLAP
// RUN: %mercury-opt --schedule=%repo/examples/schedules/mlp_overlap.sched --emit=plan %repo/examples/mlp.mlir | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-opt --schedule=%repo/examples/schedules/mlp_ag_rs.sched --commir-print-comm-plan %repo/examples/mlp.mlir | FileCheck %s --check-prefix=AGRS

// TP: // comm-plan @mlp: mesh [2], 2 ranks, 4 stages
// TP-NEXT: //   @X: all_gather, 2 ops in 1 stages, 64.0 MiB sent in total
// TP-NEXT: //   @Y: reduce_scatter(add), 2 ops in 1 stages, 64.0 MiB sent in total

// OVERLAP: // comm-plan @mlp: mesh [2], 2 ranks, 7 stages
// OVERLAP-NEXT: //   @X: ring p2p, 4 ops in 2 stages, 64.0 MiB sent in total, levels [0]
// OVERLAP-NEXT: //   @Y: partial p2p (shift-reduce), 4 ops in 2 stages, 64.0 MiB sent in total, levels [0]

// mlp_ag_rs: the loop nest distributed at @H, the all-gather half starting with the GPU's own
// rows and the reduce-scatter half with the peer's (lit/lowering/received-partials.mlir checks
// its plan); the same transfers as the overlapped schedule, in two more stages.
// AGRS: // comm-plan @mlp: mesh [2], 2 ranks, 9 stages
// AGRS-NEXT: //   @X: ring p2p, 4 ops in 2 stages, 64.0 MiB sent in total, levels [0]
// AGRS-NEXT: //   @Y: partial p2p (shift-reduce), 4 ops in 2 stages, 64.0 MiB sent in total, levels [0]

// The first gemm's f32 product is never stored: GeLU and the cast are its cuBLASLt epilogue
// (lowering/conversion/src/activation.rs), written straight into @H's bf16 tile.
// PLAN-NOT:  "name": "gemm.out0.0",{{[[:space:]]*}}"dtype": "f32"
// PLAN:      "name": "H.out",
// PLAN-NEXT: "dtype": "bf16",
// PLAN:      "op": "patch",
// PLAN-NEXT: "patch": {
// PLAN-NEXT:   "kind": "gemm",
// PLAN-NEXT:   "accumulate": false,
// PLAN-NEXT:   "epilogue": "gelu"
// PLAN-NEXT: },
// PLAN:      "kind": "gemm",
// PLAN-NEXT: "accumulate": true
// PLAN-NOT:  "op": "tile"
