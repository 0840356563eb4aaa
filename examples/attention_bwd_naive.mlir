// The causal backward of examples/attention_bwd.mlir (--kernel attention_bwd) written naively:
// FlashAttention-2's backward with tile ops on the forward's Q, K, V, output O, log-sum-exp LSE
// and the loss's gradient dO (bf16, casts before the bf16 matmuls). `mercury-opt --patch`
// proves it is what the attention_bwd patch computes and rewrites it to that patch
// (lit/passes/patch-backward.mlir); the CPU executor runs it unpatched too. Multi-head only:
// with grouped-query heads dK and dV sum over a group's query heads, which no tile op here
// writes (use the patch).
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
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.08838834764831845 : !commir.tile<f32>
  %tm = commir.mask causal %t : !commir.tile<f32>
  %z = commir.binary sub %tm, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %pb = commir.cast %p : !commir.tile<f32> to !commir.tile<bf16>
  %dv = commir.matmul %pb, %do transpose_a : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %dof = commir.cast %do : !commir.tile<bf16> to !commir.tile<f32>
  %of = commir.cast %o : !commir.tile<bf16> to !commir.tile<f32>
  %od = commir.binary mul %dof, %of : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  %dsc = commir.scale %ds by 0.08838834764831845 : !commir.tile<f32>
  %dsb = commir.cast %dsc : !commir.tile<f32> to !commir.tile<bf16>
  %dq = commir.matmul %dsb, %k : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %dk = commir.matmul %dsb, %q transpose_a : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}
