// An inout buffer (lit/lowering/two-reductions.mlir): refused by the lowering.
commir.mesh @mesh shape [2]
commir.kernel @inplace on @mesh {
  commir.axis @m = 8 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@m, @c] f32 inout sharding [S(0), R]
  commir.buffer @B : [@m, @c] f32 out sharding [S(0), R]
  %a = commir.load @A[@m, @c] : !commir.tile<f32>
  commir.store %a into @B[@m, @c] : !commir.tile<f32>
  %e = commir.unary exp %a : !commir.tile<f32>
  commir.store %e into @A[@m, @c] : !commir.tile<f32>
}
