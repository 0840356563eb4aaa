// join merges two different axes: joining one with itself is refused by join, at the axis.
// RUN: %mercury-opt --join="outer=b inner=b" --verify-diagnostics %s

commir.mesh @m shape [4]
commir.kernel @attn on @m {
  // expected-error@+1 {{join: cannot join '@b' with itself (outer and inner must be two different axes)}}
  commir.axis @b = 2 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in
  commir.buffer @K : [@b, @h, @j, 4] f32 in
  commir.buffer @V : [@b, @h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
