// Llama-3-8B MLP on 2 GPUs (tensor parallelism 2): 8192 tokens, model dim 4096, hidden dim
// 14336, bf16; Y = GeLU(X W1) W2 (tanh GeLU), X and Y sequence-sharded, W1 column- and W2
// row-parallel, the hidden activation in the rank-local temp @H. The same operator as
// examples/mlp.mlir; run it with examples/schedules/mlp_ag_rs.sched (an all-gather GEMM loop
// and a GEMM reduce-scatter loop, each overlapped), mlp_overlap.sched (one loop, both GEMMs of
// each row block together) or mlp_megatron.sched. The real-GPU suite runs it
// side by side with PyTorch (scripts/baselines/mlp.py, case mlp.llama3-8b.m8192).
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
