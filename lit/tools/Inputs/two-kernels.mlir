// Two kernels on two meshes (a new-user pass input): a GEMM on [4] and a loop nest on [2].
commir.mesh @mesh shape [4] names ["gpu"]
commir.mesh @mesh2 shape [2] names ["x"]

commir.kernel @gemm on @mesh {
  commir.axis @m = 12 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 6 spatial
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @B : [@k, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
commir.kernel @lw on @mesh2 {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.axis @c = 2 spatial
  commir.buffer @X : [@i, @j, @c] f32 in
  commir.buffer @Y : [@i, @c] f32 out
  commir.for @j {
    %x = commir.load @X[@i, @j, @c] : !commir.tile<f32>
    %r = commir.unary exp %x : !commir.tile<f32>
    commir.store %r into @Y[@i, @c] : !commir.tile<f32>
  }
}
