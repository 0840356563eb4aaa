// An output's declared placement is a contract with the caller: a schedule computes the output
// wherever its loops put it, and the lowering delivers it as declared (the transfers are in the
// plan, so the cost model prices them). Passes that would change it refuse, naming the buffer
// and both placements.
//
// REQUIRES: mercury-run
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=gpu}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=ONE
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t}, parallelize{axis=i0 level=node}, tile{axis=i_t factor=4 outer=i1 inner=i2}, parallelize{axis=i1 level=gpu}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=TWO
// RUN: %mercury-run %s --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t}, parallelize{axis=i0 level=node}, tile{axis=i_t factor=4 outer=i1 inner=i2}, parallelize{axis=i1 level=gpu})' --backend cpu --check --seed 5 | FileCheck %s --check-prefix=RANKS
// RUN: not %mercury-opt --pass-pipeline='builtin.module(shard{buffer=W axis=i level=1})' %s 2>&1 | FileCheck %s --check-prefix=SHARD
// RUN: not %mercury-opt --pass-pipeline='builtin.module(replicate{buffer=W})' %s 2>&1 | FileCheck %s --check-prefix=REPL
// RUN: not %mercury-opt --pass-pipeline='builtin.module(reshard{buffer=W sharding=S(1) at=end})' %s 2>&1 | FileCheck %s --check-prefix=END
// RUN: not %mercury-opt --reshape-mesh=shape=8 %s 2>&1 | FileCheck %s --check-prefix=RESHAPE
// RUN: not %mercury-opt --reshape-mesh=shape=4x2 %s 2>&1 | FileCheck %s --check-prefix=RESHAPE
// RUN: %mercury-opt --pass-pipeline='builtin.module(reshard{buffer=W sharding=S(0,1)}, tile{axis=i factor=2 outer=i0 inner=i_t}, parallelize{axis=i0 level=node}, tile{axis=i_t factor=4 outer=i1 inner=i2}, parallelize{axis=i1 level=gpu}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=BEGIN

commir.mesh @m shape [2, 4] names ["node", "gpu"]
commir.kernel @colsum on @m {
  commir.axis @i = 32 spatial
  commir.axis @j = 16 managed
  commir.buffer @X : [@i, @j] f32 in
  commir.buffer @Y : [@j] f32 in
  commir.buffer @W : [@i] f32 out sharding [S(0)]
  %x = commir.load @X[@i, @j] : !commir.tile<f32>
  %y = commir.load @Y[@j] : !commir.tile<f32>
  %w = commir.patch "gemm" (%x, %y) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %w into @W[@i] : !commir.tile<f32>
}

// Rows over the 4 GPUs of a node: the input is sharded, the output stays split over the
// nodes only, and each GPU receives the rows of its node's half that others computed.
// ONE: // comm-plan @colsum: mesh [2, 4], 8 ranks
// ONE: //   @W: {{.*}} 384 B sent in total
// ONE: commir.buffer @X : [@i0 * @i_t, @j] f32 in sharding [S(1), R]
// ONE: commir.buffer @W : [@i0 * @i_t] f32 out sharding [S(0)]

// Rows over both levels: the output is not silently split over the GPUs too; the 4 GPUs of a
// node gather their node's half (3 pieces of 4 rows each per rank: 24 transfers).
// TWO: //   @W: {{.*}} 24 ops in 1 stages, 384 B sent in total, levels [1]
// TWO: commir.buffer @X : [@i0 * @i1 * @i2, @j] f32 in sharding [S(0, 1), R]
// TWO: commir.buffer @W : [@i0 * @i1 * @i2] f32 out sharding [S(0)]

// --check holds each rank to its declared shard, not only the union of the pieces.
// RANKS: check @W: every rank holds its shard as declared ('sharding [S(0)]')  ok
// RANKS: check @W: relative error {{.*}} ok

// SHARD: error: shard: '@W' is an output declared as 'sharding [S(0)]'; this would deliver it as 'sharding [S(0, 1)]' instead
// REPL: error: replicate: '@W' is an output declared as 'sharding [S(0)]'; this would deliver it as replicated (no sharding) instead
// reshape-mesh would turn the output replicated over the nodes into one sharded over every
// device: refused at the declaration.
// RESHAPE: output-contract.mlir:23:3: error: reshape-mesh cannot re-express '@W' 'sharding [S(0)]' on mesh [{{[0-9, ]+}}]: it is replicated over level(s) [1] and would become sharded over every device; keep the mesh [2, 4]
// END: error: reshard: '@W' is an output declared as 'sharding [S(0)]'; this would deliver it as 'sharding [S(1)]' instead

// Computed in another placement (reshard at the start only): still delivered as declared.
// BEGIN: // comm-plan @colsum: mesh [2, 4], 8 ranks
// BEGIN: //   @W: {{.*}} levels [1]
// BEGIN: commir.reshard @W to [S(0, 1)]
// BEGIN-NOT: commir.reshard
