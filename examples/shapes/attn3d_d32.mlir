// Attention on 3-D tiles [heads, sequence, head_dim] (no batch dimension) with head dim 32:
// 8 heads, 8K context, on 8 GPUs; inputs and output sequence-sharded.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attn3d on @mesh {
  commir.axis @h = 8 spatial
  commir.axis @i = 8192 spatial
  commir.axis @j = 8192 managed
  commir.buffer @Q : [@h, @i, 32] bf16 in sharding [R, S(0), R]
  commir.buffer @K : [@h, @j, 32] bf16 in sharding [R, S(0), R]
  commir.buffer @V : [@h, @j, 32] bf16 in sharding [R, S(0), R]
  commir.buffer @O : [@h, @i, 32] bf16 out sharding [R, S(0), R]
  %q = commir.load @Q[@h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
