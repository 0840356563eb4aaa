commir.mesh @mesh shape [2]
commir.kernel @mix on @mesh {
  commir.axis @i = 4 spatial
  commir.axis @j = 6 managed
  commir.buffer @X : [@i] f32 in
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @Y : [@i] f32 out
  %x = commir.load @X[@i] : !commir.tile<f32>
  commir.store %x into @Y[@i] : !commir.tile<f32>
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %s = commir.row_reduce sum %a : !commir.tile<f32>
  commir.reduce add %s into @Y[@i] : !commir.tile<f32>
}
