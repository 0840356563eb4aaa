commir.mesh @mesh shape [4]
commir.kernel @attention on @mesh {
  commir.axis @i = 16 spatial
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@i, 4] f32 in
  commir.buffer @V : [@i, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@i] : !commir.tile<f32>
  %v = commir.load @V[@i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
