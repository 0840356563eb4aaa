// examples/attention_bwd.mlir at shapes the CPU executor runs (f32, 256 positions on 8 ranks):
// causal multi-head (4 heads, head dim 16), causal grouped-query (4 query heads on 2 key/value
// heads; 8 on 4 in @attention_bwd_gqa_kv4) and MLA's head dims (query/key head dim 24, value
// head dim 16), one kernel each
// (`--kernel NAME`). `mercury-run --kernel attention_bwd --shift-shard --backend cpu --check`
// runs the zigzag ring backward against the single-device one.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 2 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_gqa_kv4 on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 4 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 16] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}

commir.kernel @attention_bwd_mla on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 24] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 24] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 24] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 24] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}
