// examples/small/attention.mlir written naively, as examples/attention_naive.mlir is: softmax
// attention with tile ops instead of the attention patch (f32, no cast; scale 1/sqrt(16)).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.25 : !commir.tile<f32>
  %m = commir.row_reduce max %t : !commir.tile<f32>
  %d = commir.binary sub %t, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
