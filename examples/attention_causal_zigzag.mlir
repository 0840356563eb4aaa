// Causal multi-head attention at Llama-3 shapes (batch 1, 32 heads, 32K context, head dim 128)
// on 8 GPUs of one node, with the sequence in zigzag (head-tail) placement: the 32K positions
// are cut into 16 chunks of 2K and GPU r holds chunks r and 15 - r, so every GPU gets the same
// share of the causal mask's work. This is the contract of models that run on the reordered
// sequence (torch's context parallelism with load balancing): inputs arrive and the output
// leaves zigzag, nothing is permuted. `examples/attention_causal.mlir` is the same operator
// with contiguous shards (`--shift-shard` then permutes to zigzag and back).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(zigzag(0)), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
