commir.mesh @mesh shape [1]
commir.kernel @k on @mesh {
  commir.axis @m = 4 spatial
  commir.axis @d = 4 spatial
  commir.buffer @X : [@m, @d] f32 in
  commir.buffer @T : [@m, @d] f32 temp
  commir.buffer @Y : [@m, @d] f32 out
  commir.buffer @Z : [@m, @d] f32 out
  %x = commir.load @X[@m, @d] : !commir.tile<f32>
  commir.store %x into @T[@m, @d] : !commir.tile<f32>
  %t = commir.load @T[@m, @d] : !commir.tile<f32>
  %u = commir.unary exp %t : !commir.tile<f32>
  commir.store %u into @T[@m, @d] : !commir.tile<f32>
  %t2 = commir.load @T[@m, @d] : !commir.tile<f32>
  %w = commir.binary add %t, %t2 : !commir.tile<f32>
  commir.reduce add %w into @Y[@m, @d] : !commir.tile<f32>
  commir.reduce add %t into @Z[@m, @d] : !commir.tile<f32>
}
