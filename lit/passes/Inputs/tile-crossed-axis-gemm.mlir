commir.mesh @mesh shape [4]
commir.kernel @k on @mesh {
  commir.axis @i = 16 spatial
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@i, 4] f32 in
  commir.buffer @V : [@i, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@i] : !commir.tile<f32>
  %v = commir.load @V[@i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %u = commir.matmul %s, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %u into @O[@i] : !commir.tile<f32>
}
