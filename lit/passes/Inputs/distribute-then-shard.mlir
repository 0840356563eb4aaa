// distribute{axis=m0}, then shard{buffer=A axis=m0} without level= (lit/passes/distribute.mlir).
commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @f0 = 2 managed
  commir.axis @m0 = 2 spatial
  commir.axis @c = 4 spatial
  // expected-error@+1 {{shard: several loops iterate '@m0' (after distribute), so none gives the mesh level: give level=}}
  commir.buffer @A : [@m0, @c] f32 in sharding [S(0), R]
  commir.buffer @T : [@m0, @f0, @c] f32 temp sharding [R, S(0), R]
  commir.buffer @B : [@m0, @c] f32 out sharding [S(0), R]
  commir.for @f0 parallel(0) {
    commir.for @m0 {
      %a = commir.load @A[@m0, @c] : !commir.tile<f32>
      %p = commir.unary exp %a : !commir.tile<f32>
      commir.store %p into @T[@m0, @f0, @c] : !commir.tile<f32>
      %t = commir.load @T[@m0, @f0, @c] : !commir.tile<f32>
      commir.reduce add %t into @B[@m0, @c] : !commir.tile<f32>
    }
  }
}
