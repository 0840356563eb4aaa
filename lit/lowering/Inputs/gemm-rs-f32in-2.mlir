// GEMM reduce-scatter on 2 GPUs with f32 operands and a bf16 output (lit/lowering/bf16-partial-sums.mlir).
commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @rs on @mesh {
  commir.axis @m = 32 spatial
  commir.axis @k = 48 managed
  commir.axis @n = 16 spatial
  commir.buffer @A : [@m, @k] f32 in sharding [R, S(0)]
  commir.buffer @B : [@k, @n] f32 in sharding [S(0), R]
  commir.buffer @C : [@m, @n] bf16 out sharding [S(0), R]
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
