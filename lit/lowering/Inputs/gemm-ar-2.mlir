// Row-parallel GEMM on 2 GPUs with a replicated output (an all-reduce), small
// (lit/lowering/bf16-partial-sums.mlir).
commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @ar on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @k = 48 managed
  commir.axis @n = 32 spatial
  commir.buffer @A : [@m, @k] bf16 in sharding [R, S(0)]
  commir.buffer @B : [@k, @n] bf16 in sharding [S(0), R]
  commir.buffer @C : [@m, @n] bf16 out sharding [R, R]
  %a = commir.load @A[@m, @k] : !commir.tile<bf16>
  %b = commir.load @B[@k, @n] : !commir.tile<bf16>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
