// Decoding: one new query token per sequence attends to a 32K-token key/value cache; batch 4,
// 32 query heads in 8 groups of 4, head dim 64, on 8 GPUs. The query and the output are
// replicated, the cache is sharded over the sequence (each GPU holds 4K tokens of it).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @decode on @mesh {
  commir.axis @b = 4 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 1 spatial
  commir.axis @j = 32768 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 64] bf16 in sharding [R, R, R, R]
  commir.buffer @K : [@b, @hk, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 64] bf16 out sharding [R, R, R, R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
