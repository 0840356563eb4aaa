// Scores that differ from block to block (t = s / m, m a block's row maximum once @j is split):
// the pair check accepts the unsplit kernel, and refuses it once @j is tiled.
commir.mesh @mesh shape [2]
commir.kernel @attention on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 2] f32 in
  commir.buffer @K : [@j, 2] f32 in
  commir.buffer @V : [@j, 2] f32 in
  commir.buffer @O : [@i, 2] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %t = commir.binary div %s, %m : !commir.tile<f32>
  %p = commir.unary exp %t : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %lse = commir.unary log %l : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
