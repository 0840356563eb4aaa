// The naive causal attention of naive-causal-blocks.mlir with its masked scores stored into a
// temp and loaded back before the softmax (finding 01 of the 2026-12-03 new-user pass).
commir.mesh @mesh shape [2]
commir.kernel @attention on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 2] f32 in
  commir.buffer @K : [@j, 2] f32 in
  commir.buffer @V : [@j, 2] f32 in
  commir.buffer @T : [@i, @j] f32 temp
  commir.buffer @O : [@i, 2] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %sm0 = commir.mask causal %s : !commir.tile<f32>
  commir.store %sm0 into @T[@i, @j] : !commir.tile<f32>
  %sm = commir.load @T[@i, @j] : !commir.tile<f32>
  %m = commir.row_reduce max %sm : !commir.tile<f32>
  %d = commir.binary sub %sm, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
