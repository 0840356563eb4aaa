// Head parallelism with fewer key/value heads than ranks (grouped-query attention): the query
// heads @hk * @g are split over both mesh levels and each key/value head is replicated over
// the ranks of its group. The reshard to head sharding moves, point to point, only the rows
// of its head each rank lacks (no whole-tensor gather and slice), and the comm plan prices it.
//
// REQUIRES: mercury-run
// RUN: %mercury-opt --schedule=%S/Inputs/kv-heads.sched --commir-print-comm-plan %s | FileCheck %s
// RUN: %mercury-run %s --schedule=%S/Inputs/kv-heads.sched --backend cpu --check --seed 3 | FileCheck %s --check-prefix=RANKS
// RUN: not %mercury-opt --tile="axis=g factor=2 outer=g0 inner=g_t" %s 2>&1 | FileCheck %s --check-prefix=GROUP

// 4 key/value heads, 2 query heads per group, on 4 x 2 ranks.
commir.mesh @m shape [4, 2] names ["kv", "grp"]
commir.kernel @gqa on @m {
  commir.axis @b = 1 spatial
  commir.axis @hk = 4 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 8] f32 in sharding [R, R, S(0, 1), R]
  commir.buffer @K : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0, 1), R]
  commir.buffer @V : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0, 1), R]
  commir.buffer @O : [@b, @hk * @g, @i, 8] f32 out sharding [R, R, S(0, 1), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// Each rank needs the 32 x 8 floats (1 KiB) of its key head and holds 4 rows (128 B) of it:
// 8 ranks x 896 B = 7.0 KiB for K (a gather of all of K to every rank would send 28 KiB).
// CHECK: // comm-plan @gqa: mesh [4, 2], 8 ranks
// CHECK: //   @K: p2p (reshard), {{[0-9]+}} ops in 1 stages, 7.0 KiB sent in total
// CHECK: //   @V: p2p (reshard), {{[0-9]+}} ops in 1 stages, 7.0 KiB sent in total
// CHECK: commir.for @hk0 parallel(0) {
// CHECK: commir.for @g0 parallel(1) {

// RANKS: check @O: every rank holds its shard as declared
// RANKS: check @O: relative error {{.*}} ok

// The group axis alone cannot be tiled: its tiles would interleave with the key/value heads.
// GROUP: error: tile: cannot tile '@g' while '@hk' (extent 4) is a whole-range axis before it in dimension 1 of '@Q'
