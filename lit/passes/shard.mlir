// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0}, shard{buffer=B axis=j0}, commir-print-comm-plan)' %s | FileCheck %s
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=0}, tile{axis=j factor=4 outer=j0 inner=j_t}, shift{axis=j0 by=i0}, replicate{buffer=A}, commir-print-comm-plan)' %s | FileCheck %s --check-prefix=REPL
// RUN: %mercury-opt --shard="buffer=B axis=j" --split-input-file --verify-diagnostics %S/Inputs/shard-invalid.mlir

commir.mesh @m shape [4]
commir.kernel @ws on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 32 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// Sharding the shifted buffer turns the shift into a ring: 3 transfers per rank of 8 floats.
// CHECK: // comm-plan @ws: mesh [4], 4 ranks, 5 stages
// CHECK: //   @B: ring p2p, 12 ops in 3 stages, 384 B sent in total, levels [0]
// CHECK: commir.buffer @B : [@j0 * @j_t] f32 in sharding [S(0)]

// Replicating A again (every rank starts with all of it) and leaving B replicated: shifting
// alone moves nothing.
// REPL: // comm-plan @ws: mesh [4], 4 ranks, 5 stages
// REPL-NEXT: //   no communication
