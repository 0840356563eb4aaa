// Grouped-query attention whose @Q batch of 2 is declared sharded over 8 devices (a new-user
// pass input): a located verifier error.
commir.mesh @mesh shape [8]

commir.kernel @attn on @mesh {
  commir.axis @b = 2 spatial
  commir.axis @hk = 4 spatial
  commir.axis @g = 1 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 4] f32 in sharding [S(0), R, R, R]
  commir.buffer @K : [@b, @hk, @j, 4] f32 in sharding [S(0), R, R, R]
  commir.buffer @V : [@b, @hk, @j, 4] f32 in sharding [S(0), R, R, R]
  commir.buffer @O : [@b, @hk * @g, @i, 4] f32 out sharding [S(0), R, R, R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
