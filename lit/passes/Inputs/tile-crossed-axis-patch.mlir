commir.mesh @mesh shape [2]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @i, 4] f32 in
  commir.buffer @V : [@h, @i, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @i] : !commir.tile<f32>
  %v = commir.load @V[@h, @i] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
