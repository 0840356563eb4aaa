// The shift of p = exp(t - m) is the maximum of the unmasked scores while t is masked with a
// finite fill: split over keys, a fully masked block has exp(t - m) = 0, l = 0 and o = 0 / 0
// (NaN, exit 0; sixteenth new-user pass). Split, m must be the row maximum of t.
commir.mesh @mesh shape [4]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %z = commir.scale %s by 0.0 : !commir.tile<f32>
  %one = commir.unary exp %z : !commir.tile<f32>
  %floor = commir.scale %one by -10000.0 : !commir.tile<f32>
  %sm = commir.mask causal %s : !commir.tile<f32>
  %t = commir.binary max %sm, %floor : !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %t, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
