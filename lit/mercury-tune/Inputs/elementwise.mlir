// Neither attention nor a GEMM: an elementwise exp.
commir.mesh @mesh shape [4] names ["gpu"]

commir.kernel @ew on @mesh {
  commir.axis @i = 16 spatial
  commir.axis @c = 8 spatial
  commir.buffer @X : [@i, @c] f32 in
  commir.buffer @Y : [@i, @c] f32 out
  %x = commir.load @X[@i, @c] : !commir.tile<f32>
  %r = commir.unary exp %x : !commir.tile<f32>
  commir.store %r into @Y[@i, @c] : !commir.tile<f32>
}
