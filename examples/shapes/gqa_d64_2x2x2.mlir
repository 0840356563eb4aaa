// Grouped-query attention with head dim 64: 32 query heads in 8 groups of 4 sharing a
// key/value head, 8K context, on 8 GPUs seen as a 3-level mesh (2 nodes x 2 boards x 2 GPUs);
// inputs and output sequence-sharded over all three levels.
commir.mesh @mesh shape [2, 2, 2] names ["node", "board", "gpu"] bandwidth [50.0, 200.0, 450.0]

commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 8192 spatial
  commir.axis @j = 8192 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 64] bf16 in sharding [R, R, S(0, 1, 2), R]
  commir.buffer @K : [@b, @hk, @j, 64] bf16 in sharding [R, R, S(0, 1, 2), R]
  commir.buffer @V : [@b, @hk, @j, 64] bf16 in sharding [R, R, S(0, 1, 2), R]
  commir.buffer @O : [@b, @hk * @g, @i, 64] bf16 out sharding [R, R, S(0, 1, 2), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
