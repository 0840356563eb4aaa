// Cross-length causal attention backward: 1024 queries, 2048 keys, causal from the top left, so
// the keys after the last query are seen by no query (their dK and dV are zero: the plans give
// them accumulators that start and stay at the reduction's identity). bf16, head dim 64, 8 ranks;
// scripts/gpu.sh part backward runs it under the ring and USP backward schedules.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 1024 spatial
  commir.axis @j = 2048 managed
  commir.buffer @Q : [@b, @h, @i, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 64] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 64] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 64] f32 out sharding [R, R, S(0), R]
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
