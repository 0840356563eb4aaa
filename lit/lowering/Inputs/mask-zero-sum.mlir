// Y[m] = sum_n exp(mask(s)): its rows without a visible key hold zeros (lit/lowering/mask-rows.mlir).
commir.mesh @mesh shape [2]
commir.kernel @z on @mesh {
  commir.axis @m = 16 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 16 managed
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @B : [@n, @k] f32 in
  commir.buffer @Y : [@m] f32 out
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@n, @k] : !commir.tile<f32>
  %c = commir.matmul %a, %b transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %s = commir.scale %c by 0.1 : !commir.tile<f32>
  %t = commir.mask causal %s : !commir.tile<f32>
  %e = commir.unary exp %t : !commir.tile<f32>
  %r = commir.row_reduce sum %e : !commir.tile<f32>
  commir.reduce add %r into @Y[@m] : !commir.tile<f32>
}
