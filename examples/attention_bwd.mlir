// The backward of attention at Llama-3 shapes (batch 1, 32K context) on 8 GPUs of one node, in
// four kernels (`--kernel NAME`): causal multi-head attention (32 heads, head dim 128),
// grouped-query attention (32 query heads in 8 groups of 4 sharing a key/value head, causal;
// @attention_bwd_gqa_kv4: 4 key/value heads, fewer than the GPUs, for K/V head replication)
// and attention with MLA's head dims (16 heads, query/key head dim 192, value head dim 128, as
// DeepSeek-V3's). Each reads the forward's inputs Q, K, V, its output O and log-sum-exp LSE
// (what `commir.reduce lse_merge ... lse @LSE` keeps) and the loss's gradient dO, and writes
// dQ, dK, dV; everything arrives and leaves sequence-sharded. dQ is a sum over the key
// positions (@j, managed), dK and dV sums over the query positions and over each group's query
// heads (docs/dialect.md, "Attention backward"). `mercury-opt --shift-shard --kernel
// attention_bwd` gives the zigzag ring backward; examples/schedules/*_bwd.sched the others.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_gqa_kv4 on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 4 spatial
  commir.axis @g = 8 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_mla on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 16 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 192] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 192] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 192] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 192] bf16 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}
