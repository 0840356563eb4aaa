// An edge whose two ends disagree in shape (lit/mercury-opt/reshard-edges.mlir runs this file).
commir.mesh @m shape [4]

commir.kernel @producer on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @A : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @X : [@i, @d] f32 out sharding [S(0), R]
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  commir.store %a into @X[@i, @d] : !commir.tile<f32>
}

commir.kernel @narrow on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 4 spatial
  commir.buffer @X : [@i, @d] f32 in sharding [R, S(0)]
  commir.buffer @Y : [@i, @d] f32 out sharding [R, S(0)]
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  commir.store %x into @Y[@i, @d] : !commir.tile<f32>
}
