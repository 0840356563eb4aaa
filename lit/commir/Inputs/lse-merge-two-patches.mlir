// The output of one attention patch merged with the log-sum-exp of another: exact unsplit,
// relative error 0.19 once the keys are split (exit 0; sixteenth new-user pass).
commir.mesh @mesh shape [4]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @K2 : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %k2 = commir.load @K2[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  %o2, %lse2 = commir.patch "attention" (%q, %k2, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse2 into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
