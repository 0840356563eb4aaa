// RUN: %mercury-opt --tile="axis=i factor=4 outer=i0 inner=i_t" --parallelize="axis=i0 level=0 placement=zigzag" %s | FileCheck %s --check-prefix=PAR
// RUN: %mercury-opt --tile="axis=i factor=4 outer=i0 inner=i_t" --parallelize="axis=i0 level=0 placement=zigzag(2)" %s | FileCheck %s --check-prefix=CHUNKS
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0 placement=zigzag}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0}, shard{buffer=K axis=j0 placement=zigzag}, shard{buffer=V axis=j0 placement=striped(2)}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=RING
// RUN: %mercury-opt --pass-pipeline='builtin.module(reshard{buffer=K sharding=R,S(zigzag(0)),R}, reshard{buffer=V sharding=R,S(zigzag(0)),R}, tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0 placement=zigzag}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=PERM
// RUN: not %mercury-opt --tile="axis=i factor=4 outer=i0 inner=i_t" --parallelize="axis=i0 level=0 placement=spiral" %s 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not %mercury-opt --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=j_t}, shard{buffer=K axis=j0 level=0 placement=striped(16)})' %s 2>&1 | FileCheck %s --check-prefix=BADSHARD

// Causal attention over 4 GPUs, 32 query and key positions, everything replicated at first.
commir.mesh @m shape [4]
commir.kernel @attn on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// parallelize{placement=zigzag}: the buffers the axis indexes are split head-tail over level 0.
// PAR: commir.buffer @Q : [@h, @i0 * @i_t, 4] f32 in sharding [R, S(zigzag(0)), R]
// PAR: commir.buffer @K : [@h, @j, 4] f32 in
// The output is declared replicated, a contract: it stays so and is gathered at the end.
// PAR: commir.buffer @O : [@h, @i0 * @i_t, 4] f32 out{{$}}
// PAR: commir.for @i0 parallel(0) {

// Zigzag over chunks of 2 positions: 2 rounds of 8 chunks over the 4 GPUs.
// CHUNKS: commir.buffer @Q : [@h, @i0 * @i_t, 4] f32 in sharding [R, S(zigzag(0, 2)), R]

// A ring over zigzag queries and keys and striped values: 3 transfer stages on 4 GPUs, and
// the values (striped, not aligned with the keys' zigzag order) permuted once at the start;
// the output, declared replicated, delivered to every rank in one last stage.
// RING: // comm-plan @attn: mesh [4], 4 ranks, 7 stages
// RING: //   @K: ring p2p, 12 ops in 3 stages
// RING: //   @O: p2p (output delivery), 12 ops in 1 stages
// RING: //   @V: permute p2p (reshard), {{[0-9]+}} ops in 1 stages
// RING: //   @V: ring p2p, 12 ops in 3 stages
// RING: //   @Q: placed [R, S(zigzag(0)), R]
// RING: //   @K: placed [R, S(zigzag(0)), R]
// RING: //   @V: placed [R, S(striped(0, 2)), R]
// RING-NOT: //   @O: placed
// RING: //   causal attention work: busiest rank 1.00x the mean, 1.00x in the worst stage
// RING: commir.buffer @V : [@h, @j0 * @j_t, 4] f32 in sharding [R, S(striped(0, 2)), R]

// A reshard of replicated keys to zigzag is a local slice per rank (no transfer): the ring
// then passes the zigzag shards.
// PERM: //   @K: ring p2p, 12 ops in 3 stages
// PERM-NOT: permute
// PERM: //   @K: placed [R, S(zigzag(0)), R], declared [R, R, R] (moved at the start)
// PERM: causal attention work: busiest rank 1.00x the mean

// BADOPT: option 'placement': a placement is block, zigzag, zigzag(C) or striped(B), got 'spiral'

// BADSHARD: placement.mlir:[[@LINE-44]]:3: error: shard: dimension 1 of '@K' (size 32): 32 positions do not divide into rounds of 4 striped blocks of 16 of mesh level 0
