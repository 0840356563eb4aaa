// A bf16 cast of an attention patch's output merges with its log-sum-exp (it was refused as
// "o is not a quotient", sixteenth new-user pass).
commir.mesh @mesh shape [4]
commir.kernel @attention on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  %ob = commir.cast %o : !commir.tile<f32> to !commir.tile<bf16>
  commir.reduce lse_merge %ob, %lse into @O[@h, @i] : !commir.tile<bf16>, !commir.tile<f32>
}
