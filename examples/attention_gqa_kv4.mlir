// Grouped-query attention with fewer key/value heads than GPUs: 32 query heads in 4 groups of
// 8 sharing a key/value head, 32K context, head dim 128, on 8 GPUs declared as a 4 x 2 mesh.
// Ulysses cannot split 4 key/value heads over 8 ranks; with K/V head replication
// (schedules/ulysses_kv_replicated.sched, the search's role `groups`) the 4 heads go over the
// first level and each is replicated over the 2 ranks of the second, which split its group.
commir.mesh @mesh shape [4, 2] names ["kv", "grp"]

commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 4 spatial
  commir.axis @g = 8 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0, 1), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0, 1), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0, 1), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0, 1), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
