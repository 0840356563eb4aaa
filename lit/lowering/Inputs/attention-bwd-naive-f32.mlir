// The naive attention backward in tile ops (a schedule's input for matmul-batch-mismatch.mlir).
commir.mesh @mesh shape [2, 2] names ["l0", "l1"]
commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 2 spatial
  commir.axis @hk = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@b, @hk, @i, 4] f32 in sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @K : [@b, @hk, @j, 4] f32 in sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @V : [@b, @hk, @j, 4] f32 in sharding [R, R, R, R]
  commir.buffer @O : [@b, @hk, @i, 4] f32 in sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @dO : [@b, @hk, @i, 4] f32 in sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @LSE : [@b, @hk, @i] f32 in sharding [R, R, S(zigzag(0), zigzag(1))]
  commir.buffer @dQ : [@b, @hk, @i, 4] f32 out sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @dK : [@b, @hk, @j, 4] f32 out sharding [R, R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @dV : [@b, @hk, @j, 4] f32 out sharding [R, R, S(zigzag(0), zigzag(1)), R]
  %q = commir.load @Q[@b, @hk, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @hk, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @hk, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @hk, @i] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %z = commir.binary sub %s, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %od = commir.binary mul %do, %o : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %p, %dpd : !commir.tile<f32>
  %dsc = commir.scale %ds by 1.0 : !commir.tile<f32>
  %dq = commir.matmul %dsc, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dk = commir.matmul %dsc, %q transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@b, @hk, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}
