commir.mesh @mesh shape [2]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @KT : [@h, 4, @j] f32 in sharding [R, R, S(zigzag(0))]
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @KT[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %sm = commir.mask causal %s : !commir.tile<f32>
  %m = commir.row_reduce max %sm : !commir.tile<f32>
  %d = commir.binary sub %sm, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
