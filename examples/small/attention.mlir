// A small multi-head attention (4 heads, 256 positions, head dim 16) for the CPU executor, on
// 8 GPUs of one node. Inputs and output arrive sequence-sharded (32 tokens each).
// The local operator is one attention patch over whole tiles; the key/value positions (@j)
// form a managed reduction whose partial results merge with log-sum-exp correction.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
