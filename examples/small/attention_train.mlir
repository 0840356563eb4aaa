// One training step of causal attention for the CPU executor (f32, 4 heads, 256 positions,
// head dim 16, 8 ranks): the forward @attention keeps its output O and log-sum-exp LSE, the
// backward @attention_bwd reads them with the loss's gradient dO and writes dQ, dK, dV.
// `mercury-run` runs a module of a forward and its backward as one step (the backward's
// inputs named as the forward's buffers come from it; docs/multi-gpu.md... see
// `mercury-run --help`, "training step"). The sequence is placed zigzag (head-tail) in both:
// the forward leaves O and LSE where the balanced ring backward reads them, nothing is
// permuted between the two.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 out sharding [R, R, S(zigzag(0)), R]
  commir.buffer @LSE : [@b, @h, @i] f32 out sharding [R, R, S(zigzag(0))]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] lse @LSE : !commir.tile<f32>, !commir.tile<f32>
}

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dO : [@b, @h, @i, 16] f32 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(zigzag(0))]
  commir.buffer @dQ : [@b, @h, @i, 16] f32 out sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dK : [@b, @h, @j, 16] f32 out sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dV : [@b, @h, @j, 16] f32 out sharding [R, R, S(zigzag(0)), R]
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
