// examples/attention.mlir written naively: the body computes softmax attention with tile ops
// (scores, scale, row max, exp, row sum, second matmul, normalisation, log-sum-exp) instead of
// naming the attention patch. `mercury-opt --patch` proves it is what the attention patch
// computes and rewrites it to the plan of the hand-patched example
// (lit/passes/patch-attention.mlir); the CPU executor runs it unpatched too.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.08838834764831845 : !commir.tile<f32>
  %m = commir.row_reduce max %t : !commir.tile<f32>
  %d = commir.binary sub %t, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %pb = commir.cast %p : !commir.tile<f32> to !commir.tile<bf16>
  %u = commir.matmul %pb, %v : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
