// The lowering holds a rank's tiles of a buffer as one partition: a slot per stored tile and
// an accumulator per reduced tile, keyed by the exact box (context::partition_conflict). A
// store or reduction whose tile overlaps another without being it, or a tile both stored into
// and reduced into, is refused where it is. Each of these computed a wrong answer with exit 0,
// and --check passed it (its single-device reference has the same lowering; ninth new-user
// pass, 2026-12-03):
// - a store after a reduction into the same tile was dropped (Y = sum A, not X);
// - a reduction after a store into it dropped the store (Y = sum A, not X + sum A);
// - 10·X stored tile by tile after X stored whole delivered X;
// - a temp updated tile by tile in a loop was read from the whole stale tile;
// - a reduction of 10·X tile by tile after X whole did not sum (Y = X, not 11·X).
// RUN: %exit-status %mercury-run %S/Inputs/partition-reduce-then-store.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=RS
// RS: partition-reduce-then-store.mlir:12:3: error: this store writes [0:4] of '@Y' on rank 0, which is the tile [0:4] that rank 0 has reduced into
// RS: exit status 1
// RUN: %exit-status %mercury-run %S/Inputs/partition-store-then-reduce.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=SR
// SR: partition-store-then-reduce.mlir:12:3: error: this reduction into [0:4] of '@Y' (accumulated on rank 0) is the tile [0:4] that rank 0 has stored into
// SR: exit status 1
// RUN: %exit-status %mercury-opt --emit=plan %S/Inputs/partition-out-whole-then-tiles.mlir 2>&1 | FileCheck %s --check-prefix=OUT
// OUT: error: this store writes [0:2] of '@Y' on rank 0, which overlaps the tile [0:4] that rank 0 has stored into without being that tile
// OUT: exit status 1
// RUN: %exit-status %mercury-opt --emit=plan %S/Inputs/partition-temp-update.mlir 2>&1 | FileCheck %s --check-prefix=TEMP
// TEMP: partition-temp-update.mlir:13:5: error: this store writes [0:2] of '@T' on rank 0, which overlaps the tile [0:4] that rank 0 has stored into without being that tile
// TEMP: exit status 1
// RUN: %exit-status %mercury-run %S/Inputs/partition-reduce-whole-then-tiles.mlir --backend cpu --check 2>&1 | FileCheck %s --check-prefix=RED
// RED: partition-reduce-whole-then-tiles.mlir:12:5: error: this reduction into [0:2] of '@Y' (accumulated on rank 0) overlaps the tile [0:4] that rank 0 has reduced into without being that tile
// RED: exit status 1
// Tiles that are the same or disjoint stay as they were: a store of the same tile again, and
// reductions of one tile from several places (lit/lowering/two-reductions.mlir).
