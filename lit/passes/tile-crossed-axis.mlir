// Self-attention written with one sequence axis (Q, K and V all bound to '@i'; the scores are
// [@i, @i]) computes the whole product unscheduled, but a tile of '@i' (shift-shard's first
// step) took the same block in both dimensions: only the diagonal blocks of the scores,
// relative error 1.3-1.7 with exit 0 from --emit=plan, in the naive, the attention-patch and
// the plain matmul forms (sixteenth new-user pass; older than 2026-12-06). `tile` refuses an
// axis that covers two dimensions of one value, located at that value.
// REQUIRES: mercury-run
// RUN: %mercury-run %S/Inputs/tile-crossed-axis.mlir --backend cpu --check | FileCheck %s --check-prefix=WHOLE
// WHOLE: check @O: relative error {{.*}} ok
// RUN: not %mercury-opt %S/Inputs/tile-crossed-axis.mlir --shift-shard 2>&1 | FileCheck %s --check-prefix=NAIVE
// NAIVE: tile-crossed-axis.mlir:11:8: error: tile: '@i' covers two dimensions of the value computed here: a loop over its blocks would take the same block in both, only the diagonal blocks of the whole product (bind one side, e.g. the keys, to an axis of its own)
// RUN: not %mercury-opt %S/Inputs/tile-crossed-axis-gemm.mlir --tile='axis=i factor=4' 2>&1 | FileCheck %s --check-prefix=GEMM
// GEMM: tile-crossed-axis-gemm.mlir:11:8: error: tile: '@i' covers two dimensions of the value computed here
// RUN: not %mercury-opt %S/Inputs/tile-crossed-axis-patch.mlir --shift-shard 2>&1 | FileCheck %s --check-prefix=PATCH
// PATCH: tile-crossed-axis-patch.mlir:12:14: error: tile: '@i' covers two dimensions of this attention's scores (its queries and keys are both its positions)
// Another axis of the same kernel still tiles.
// RUN: %mercury-run %S/Inputs/tile-crossed-axis-patch.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=h factor=2 outer=h0 inner=ht},parallelize{axis=h0 level=0 shard=false})' | FileCheck %s --check-prefix=WHOLE
