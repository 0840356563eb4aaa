// Grouped-query attention in f32: 16 query heads in 8 groups of 2, head dim 64, batch 2, 1K
// context, not causal, on 8 GPUs; inputs and output sequence-sharded. f32 q/k/v run on the
// GPU's f32 attention kernel (cuDNN's SDPA takes 16-bit inputs only).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 2 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 1024 spatial
  commir.axis @j = 1024 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 64] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 64] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 64] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 64] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
