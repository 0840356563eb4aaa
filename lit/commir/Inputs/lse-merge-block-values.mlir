// Values that differ from block to block: v scaled by a maximum over a split axis @k, and the
// shift m a maximum over @k too, so that o and lse are both block-local over @k_o. The merge
// would average the blocks' scalings where the unsplit kernel takes their maximum.
commir.mesh @mesh shape [2]
commir.kernel @attn on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.axis @k = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @W : [@j, @k] f32 in
  commir.buffer @W2 : [@i, @k] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %w = commir.load @W[@j, @k] : !commir.tile<f32>
  %r = commir.row_reduce max %w : !commir.tile<f32>
  %v2 = commir.binary mul %v, %r : !commir.tile<f32>
  %w2 = commir.load @W2[@i, @k] : !commir.tile<f32>
  %m = commir.row_reduce max %w2 : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v2 : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
