// Attention whose axes have names that need quotes (input of names.mlir).
commir.mesh @mesh shape [4] names ["gpu"]
commir.kernel @attention on @mesh {
  commir.axis @"b" = 1 spatial
  commir.axis @"head-n" = 2 spatial
  commir.axis @"i-j" = 32 spatial
  commir.axis @"key pos" = 32 managed
  commir.buffer @Q : [@b, @"head-n", @"i-j", 8] f32 in
  commir.buffer @K : [@b, @"head-n", @"key pos", 8] f32 in
  commir.buffer @V : [@b, @"head-n", @"key pos", 8] f32 in
  commir.buffer @O : [@b, @"head-n", @"i-j", 8] f32 out
  %q = commir.load @Q[@b, @"head-n", @"i-j"] : !commir.tile<f32>
  %k = commir.load @K[@b, @"head-n", @"key pos"] : !commir.tile<f32>
  %v = commir.load @V[@b, @"head-n", @"key pos"] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @"head-n", @"i-j"] : !commir.tile<f32>, !commir.tile<f32>
}
