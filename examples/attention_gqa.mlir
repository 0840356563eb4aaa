// Grouped-query attention, Llama-3 8B: 32 query heads in 8 groups of 4 sharing a key/value
// head, 32K context, head dim 128, on 8 GPUs. A query head index is @hk * @g (the dimension
// is bound to two axes); keys and values have only the 8 @hk heads.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
