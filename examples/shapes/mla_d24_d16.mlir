// A small multi-head latent attention: query/key head dim 24, value/output head dim 16 (the
// shapes of ../shared/cases/02-mla-asymmetric-v-dim, in bf16); 8 heads, 2K context, on 8 GPUs;
// inputs and output sequence-sharded.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 2048 spatial
  commir.axis @j = 2048 managed
  commir.buffer @Q : [@b, @h, @i, 24] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 24] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
