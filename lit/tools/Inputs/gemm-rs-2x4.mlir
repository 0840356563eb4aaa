// A GEMM reduce-scatter declared on a [2, 4] mesh (a new-user pass input).
commir.mesh @m4 shape [2, 4]

commir.kernel @gemm_rs on @m4 {
  commir.axis @m = 64 spatial
  commir.axis @k = 64 managed
  commir.axis @n = 32 spatial
  commir.buffer @A : [@m, @k] f32 in sharding [R, S(0, 1)]
  commir.buffer @B : [@k, @n] f32 in sharding [S(0, 1), R]
  commir.buffer @C : [@m, @n] f32 out sharding [S(0, 1), R]
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
