commir.mesh @mesh shape [2]
commir.kernel @ovt on @mesh {
  commir.axis @i0 = 2 spatial
  commir.axis @i_t = 2 spatial
  commir.buffer @X : [@i0 * @i_t] f32 in
  commir.buffer @T : [@i0 * @i_t] f32 temp
  commir.buffer @Y : [@i0 * @i_t] f32 out
  %x = commir.load @X[@i0, @i_t] : !commir.tile<f32>
  commir.store %x into @T[@i0, @i_t] : !commir.tile<f32>
  commir.for @i0 {
    %a = commir.load @X[@i0, @i_t] : !commir.tile<f32>
    %b = commir.scale %a by 10.0 : !commir.tile<f32>
    commir.store %b into @T[@i0, @i_t] : !commir.tile<f32>
    %t = commir.load @T[@i0, @i_t] : !commir.tile<f32>
    commir.store %t into @Y[@i0, @i_t] : !commir.tile<f32>
  }
}
