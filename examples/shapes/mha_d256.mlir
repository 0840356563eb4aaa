// Multi-head attention with head dim 256 (Gemma-style heads, the largest cuDNN's fused kernels
// take): batch 2, 8 heads, 4K context, on 8 GPUs; inputs and output sequence-sharded.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 2 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 4096 spatial
  commir.axis @j = 4096 managed
  commir.buffer @Q : [@b, @h, @i, 256] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 256] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 256] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 256] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
