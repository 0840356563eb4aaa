commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @i0 = 2 spatial
  commir.axis @j0 = 2 managed
  commir.axis @it = 2 spatial
  commir.axis @d = 4 spatial
  commir.buffer @X : [@i0 * @it, @d] f32 in
  commir.buffer @A : [@i0 * @it, @j0 * @d] f32 in
  commir.buffer @Y : [@i0 * @it, @d] f32 out
  commir.buffer @Z : [@d] f32 out
  commir.for @i0 {
    %x = commir.load @X[@i0, @it, @d] : !commir.tile<f32>
    %e0 = commir.unary exp %x : !commir.tile<f32>
    %s0 = commir.matmul %e0, %x transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    %r0 = commir.row_reduce sum %s0 : !commir.tile<f32>
    commir.reduce add %r0 into @Z[@d] : !commir.tile<f32>
    commir.for @j0 {
      %a = commir.load @A[@i0, @it, @j0, @d] : !commir.tile<f32>
      commir.reduce add %a into @Y[@i0, @it, @d] : !commir.tile<f32>
    }
    %e = commir.unary exp %x : !commir.tile<f32>
    %s = commir.matmul %e, %x transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    %r = commir.row_reduce sum %s : !commir.tile<f32>
    commir.reduce add %r into @Z[@d] : !commir.tile<f32>
  }
}
