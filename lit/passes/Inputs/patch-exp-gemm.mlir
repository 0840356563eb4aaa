// exp(X) W: an exponential nothing sums is no softmax, and its product is a plain gemm.
commir.mesh @mesh shape [2]
commir.kernel @g on @mesh {
  commir.axis @m = 8 spatial
  commir.axis @n = 8 spatial
  commir.axis @k = 8 managed
  commir.buffer @X : [@m, @k] f32 in
  commir.buffer @W : [@k, @n] f32 in
  commir.buffer @Y : [@m, @n] f32 out
  %x = commir.load @X[@m, @k] : !commir.tile<f32>
  %w = commir.load @W[@k, @n] : !commir.tile<f32>
  %e = commir.unary exp %x : !commir.tile<f32>
  %y = commir.matmul %e, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %y into @Y[@m, @n] : !commir.tile<f32>
}
