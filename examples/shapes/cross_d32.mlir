// Cross-attention with head dim 32: 2K queries (a decoder) attend to 8K keys and values (an
// encoder's output), 8 heads, on 8 GPUs; both sides sequence-sharded.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @cross_attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 2048 spatial
  commir.axis @j = 8192 managed
  commir.buffer @Q : [@b, @h, @i, 32] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 32] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 32] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 32] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
