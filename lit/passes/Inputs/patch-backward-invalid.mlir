// Refusals of patch{kernel=attention_bwd} (lit/passes/patch-backward.mlir).
// dS scaled by another factor than the scores.
commir.mesh @mesh shape [2]
commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @dO : [@h, @i, 8] f32 in
  commir.buffer @LSE : [@h, @i] f32 in
  commir.buffer @dQ : [@h, @i, 8] f32 out
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.buffer @dV : [@h, @j, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@h, @i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.5 : !commir.tile<f32>
  %z = commir.binary sub %t, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %od = commir.binary mul %do, %o : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention_bwd}: ds must be scaled by the scores' scale 0.5 (commir.scale %ds by 0.5)}}
  %dsc = commir.scale %ds by 0.25 : !commir.tile<f32>
  %dq = commir.matmul %dsc, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dk = commir.matmul %dsc, %q transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}

// -----

// D is not the row sum of do * o.
commir.mesh @mesh shape [2]
commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @dO : [@h, @i, 8] f32 in
  commir.buffer @LSE : [@h, @i] f32 in
  commir.buffer @dQ : [@h, @i, 8] f32 out
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.buffer @dV : [@h, @j, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@h, @i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.5 : !commir.tile<f32>
  %z = commir.binary sub %t, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %od = commir.binary mul %o, %o : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention_bwd}: D sums do * o (binary mul %do, %o, either perhaps cast), with the do of dv}}
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  %dsc = commir.scale %ds by 0.5 : !commir.tile<f32>
  %dq = commir.matmul %dsc, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dk = commir.matmul %dsc, %q transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}

// -----

// The scores are used twice (a row maximum besides the subtraction of lse).
commir.mesh @mesh shape [2]
commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @dO : [@h, @i, 8] f32 in
  commir.buffer @LSE : [@h, @i] f32 in
  commir.buffer @dQ : [@h, @i, 8] f32 out
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.buffer @dV : [@h, @j, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@h, @i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention_bwd}: the scores must be used by exactly one op}}
  %t = commir.scale %s by 0.5 : !commir.tile<f32>
  %m = commir.row_reduce max %t : !commir.tile<f32>
  %z = commir.binary sub %t, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %od = commir.binary mul %do, %o : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  %dsc = commir.scale %ds by 0.5 : !commir.tile<f32>
  %dq = commir.matmul %dsc, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dk = commir.matmul %dsc, %q transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}

// -----

// dk multiplies by o instead of q.
commir.mesh @mesh shape [2]
commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @dO : [@h, @i, 8] f32 in
  commir.buffer @LSE : [@h, @i] f32 in
  commir.buffer @dQ : [@h, @i, 8] f32 out
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.buffer @dV : [@h, @j, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@h, @i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.5 : !commir.tile<f32>
  %z = commir.binary sub %t, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %od = commir.binary mul %do, %o : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention_bwd}: dq = matmul %ds, %k and dk = matmul %ds, %q transpose_a (with the scores' q and k) are missing}}
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  %dsc = commir.scale %ds by 0.5 : !commir.tile<f32>
  %dq = commir.matmul %dsc, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dk = commir.matmul %dsc, %o transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}
