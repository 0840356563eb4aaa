// A causal mask of a gemm patch product, stored (lit/lowering/mask-rows.mlir).
commir.mesh @mesh shape [2]
commir.kernel @gm on @mesh {
  commir.axis @i = 16 spatial
  commir.axis @k = 8 managed
  commir.axis @j = 16 spatial
  commir.buffer @A : [@i, @k] f32 in
  commir.buffer @B : [@k, @j] f32 in
  commir.buffer @C : [@i, @j] f32 out
  %a = commir.load @A[@i, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %s = commir.scale %c by 0.1 : !commir.tile<f32>
  %t = commir.mask causal %s : !commir.tile<f32>
  %e = commir.unary exp %t : !commir.tile<f32>
  commir.store %e into @C[@i, @j] : !commir.tile<f32>
}
