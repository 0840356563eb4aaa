commir.mesh @mesh shape [4] names ["gpu"]

commir.kernel @nothing on @mesh {
  commir.axis @i = 4096 spatial
  commir.buffer @A : [@i] f32 in sharding [S(0)]
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i] : !commir.tile<f32>
}
