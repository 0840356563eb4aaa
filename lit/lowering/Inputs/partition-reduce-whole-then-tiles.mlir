commir.mesh @mesh shape [2]
commir.kernel @ov on @mesh {
  commir.axis @i0 = 2 spatial
  commir.axis @i_t = 2 spatial
  commir.buffer @X : [@i0 * @i_t] f32 in
  commir.buffer @Y : [@i0 * @i_t] f32 out
  %x = commir.load @X[@i0, @i_t] : !commir.tile<f32>
  commir.reduce add %x into @Y[@i0, @i_t] : !commir.tile<f32>
  commir.for @i0 {
    %a = commir.load @X[@i0, @i_t] : !commir.tile<f32>
    %b = commir.scale %a by 10.0 : !commir.tile<f32>
    commir.reduce add %b into @Y[@i0, @i_t] : !commir.tile<f32>
  }
}
