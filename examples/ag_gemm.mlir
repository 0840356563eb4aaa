// All-gather GEMM of tensor parallelism (the column-parallel linear after a sequence-parallel
// region): C = A x B with M = K = N = 8192 in bf16 on 8 GPUs. A arrives sharded by rows
// (tokens), B and C are sharded by columns; every GPU needs all of A.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @ag_gemm on @mesh {
  commir.axis @m = 8192 spatial
  commir.axis @k = 8192 managed
  commir.axis @n = 8192 spatial
  commir.buffer @A : [@m, @k] bf16 in sharding [S(0), R]
  commir.buffer @B : [@k, @n] bf16 in sharding [R, S(0)]
  commir.buffer @C : [@m, @n] bf16 out sharding [R, S(0)]
  %a = commir.load @A[@m, @k] : !commir.tile<bf16>
  %b = commir.load @B[@k, @n] : !commir.tile<bf16>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
