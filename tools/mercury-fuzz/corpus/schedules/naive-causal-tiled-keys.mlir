// step: tile{axis=j factor=2 outer=j0 inner=j_t}
// Naive causal attention with only the key axis tiled: the query rows before the second key
// block see none of its keys (NaN softmax); the lowering refuses it (found by mercury-fuzz,
// schedule seeds 318 and 358 of --seed 7).
commir.mesh @mesh shape [2] names ["l0"]
commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 1 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@b, @hk, @i, 2] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 2] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 2] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk, @i, 2] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %sm = commir.mask causal %s : !commir.tile<f32>
  %t = commir.scale %sm by 0.7071067811865475 : !commir.tile<f32>
  %m = commir.row_reduce max %t : !commir.tile<f32>
  %d = commir.binary sub %t, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %pb = commir.cast %p : !commir.tile<f32> to !commir.tile<f32>
  %u = commir.matmul %pb, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @i] : !commir.tile<f32>, !commir.tile<f32>
}
