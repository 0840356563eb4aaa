// Multi-head latent attention in f32: query/key head dim 24, value/output head dim 16 (the
// shape and precision of ../shared/cases/02-mla-asymmetric-v-dim, 4x longer); 8 heads, 256
// positions, causal, on 8 GPUs; inputs and output sequence-sharded. f32 q/k/v run on the GPU's
// f32 attention kernel (cuDNN's SDPA takes 16-bit inputs only).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 24] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 24] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
