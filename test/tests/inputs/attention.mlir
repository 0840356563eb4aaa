// Multi-head attention at Llama-3 shapes: batch 1, 32 heads, 32K context, head dim 128, on
// 8 GPUs of one node. Inputs and output arrive sequence-sharded (each GPU holds 4K tokens).
// The local operator is one attention patch over whole tiles; the key/value positions (@j)
// form a managed reduction whose partial results merge with log-sum-exp correction.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
