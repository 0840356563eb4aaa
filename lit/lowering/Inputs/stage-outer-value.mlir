commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @i0 = 2 managed
  commir.axis @it = 2 spatial
  commir.axis @d = 4 spatial
  commir.axis @e = 4 spatial
  commir.buffer @X : [@i0 * @it, @d] f32 in
  commir.buffer @W : [@d, @e] f32 in
  commir.buffer @Y : [@it, @e] f32 out
  %w = commir.load @W[@d, @e] : !commir.tile<f32>
  
  commir.for @i0 {
    %x = commir.load @X[@i0, @it, @d] : !commir.tile<f32>
    %y = commir.matmul %x, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    commir.reduce add %y into @Y[@it, @e] : !commir.tile<f32>
  }
}
