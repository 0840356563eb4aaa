// Multi-head latent attention as DeepSeek-V3 computes it after up-projection: query/key head
// dim 192 (128 + 64 rotary), value/output head dim 128; causal, 16 heads, 4K context, on 8
// GPUs; inputs and output sequence-sharded. The output takes V's head dim.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 16 spatial
  commir.axis @i = 4096 spatial
  commir.axis @j = 4096 managed
  commir.buffer @Q : [@b, @h, @i, 192] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 192] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
