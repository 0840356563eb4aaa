// A Megatron-style tensor-parallel MLP in one kernel, Llama-3-8B sizes (8192 tokens, model dim
// 4096, hidden dim 14336, bf16) on 2 GPUs: Y = GeLU(X W1) W2. X arrives sequence-sharded (rows
// split over the GPUs), W1 column-parallel and W2 row-parallel (split along the hidden dim @f),
// and Y must leave sequence-sharded again: an all-gather before the first GEMM and a
// reduce-scatter after the second, the two communications a schedule can overlap with the
// GEMMs (examples/schedules/mlp_*.sched). The hidden activation goes through the temp buffer
// @H (rank-local, never communicated); GeLU and the cast to bf16 are generated code, fused
// into one epilogue kernel over the first GEMM's output tile. The matmuls become the gemm
// patch with `patch{kernel=gemm}` (the schedules' first step).
commir.mesh @mesh shape [2] names ["gpu"] bandwidth [450.0]

commir.kernel @mlp on @mesh {
  commir.axis @m = 8192 spatial
  commir.axis @d = 4096 managed
  commir.axis @f = 14336 managed
  commir.axis @e = 4096 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [S(0), R]
  commir.buffer @W1 : [@d, @f] bf16 in sharding [R, S(0)]
  commir.buffer @H : [@m, @f] bf16 temp
  commir.buffer @W2 : [@f, @e] bf16 in sharding [S(0), R]
  commir.buffer @Y : [@m, @e] bf16 out sharding [S(0), R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w1 = commir.load @W1[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w1 : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %g = commir.unary gelu %a : !commir.tile<f32>
  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %gb into @H[@m, @f] : !commir.tile<bf16>
  %h = commir.load @H[@m, @f] : !commir.tile<bf16>
  %w2 = commir.load @W2[@f, @e] : !commir.tile<bf16>
  %y = commir.matmul %h, %w2 : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %y into @Y[@m, @e] : !commir.tile<f32>
}
