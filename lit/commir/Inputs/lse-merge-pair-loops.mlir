// o block-local over a loop its lse is not: v scaled by a ratio of sums over a split axis @k
// (block-local since the quotient rule of 2026-12-06), lse = log l over the whole key axis.
// lse_merge would average o over @k's blocks (relative error 0.3, exit 0; fifteenth pass).
commir.mesh @mesh shape [2]
commir.kernel @attn on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.axis @k = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @W : [@j, @k] f32 in
  commir.buffer @W2 : [@j, @k] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %w = commir.load @W[@j, @k] : !commir.tile<f32>
  %we = commir.unary exp %w : !commir.tile<f32>
  %ws = commir.row_reduce sum %we : !commir.tile<f32>
  %w2 = commir.load @W2[@j, @k] : !commir.tile<f32>
  %we2 = commir.unary exp %w2 : !commir.tile<f32>
  %ws2 = commir.row_reduce sum %we2 : !commir.tile<f32>
  %r = commir.binary div %ws, %ws2 : !commir.tile<f32>
  %v2 = commir.binary mul %v, %r : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %p = commir.unary exp %s : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v2 : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %lse = commir.unary log %l : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
