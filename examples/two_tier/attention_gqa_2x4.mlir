// Grouped-query attention (32 query heads, 8 key/value heads) at Llama-3 shapes, batch 1, 32K
// context, head dim 128, on 2 nodes x 4 GPUs: the GQA operator of issue 13's two-tier table
// (scripts/gpu.sh part `twotier`, docs/multi-gpu.md "Two tiers"). Inputs and output arrive
// sequence-sharded over both levels; the key/value positions (@j) form a managed reduction whose
// partial results merge with log-sum-exp correction.
commir.mesh @mesh shape [2, 4] names ["node", "gpu"] bandwidth [12.5, 450.0]

commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
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
