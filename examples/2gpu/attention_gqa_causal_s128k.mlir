// Causal grouped-query attention, Llama-3 8B heads (32 query heads in 8 groups of 4), batch 1,
// 128K context, head dim 128, on 2 GPUs, in zigzag (head-tail) placement: GPU r holds chunks r
// and 3 - r of 4 (the contract of torch's context parallelism with load balancing).
// `mercury-run --shift-shard` makes it a ring of 2 in which both GPUs do the same work.
commir.mesh @mesh shape [2] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 131072 spatial min 128
  commir.axis @j = 131072 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(zigzag(0)), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
