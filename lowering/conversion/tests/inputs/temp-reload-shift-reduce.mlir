commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @p = 2 managed
  commir.axis @m0 = 2 spatial
  commir.axis @c = 2 spatial
  commir.axis @mt = 2 spatial
  commir.axis @d = 4 spatial
  commir.axis @one = 1 spatial
  commir.buffer @X : [@p, @m0 * @c * @mt, @d] f32 in sharding [S(0), R, R]
  commir.buffer @T : [@one, @mt, @d] f32 temp
  commir.buffer @Y : [@m0 * @c * @mt, @d] f32 out sharding [S(0), R]
  commir.buffer @Z : [@m0 * @c * @mt, @d] f32 out sharding [S(0), R]
  commir.for @p parallel(0) {
    commir.for @m0 shift(@p) {
      commir.for @c {
        %x = commir.load @X[@p, (@m0 + @p) mod 2, @c, @mt, @d] : !commir.tile<f32>
        %e1 = commir.unary exp %x : !commir.tile<f32>
        commir.store %e1 into @T[@one, @mt, @d] : !commir.tile<f32>
        %t = commir.load @T[@one, @mt, @d] : !commir.tile<f32>
        %sq = commir.binary mul %x, %x : !commir.tile<f32>
        commir.store %sq into @T[@one, @mt, @d] : !commir.tile<f32>
        %t2 = commir.load @T[@one, @mt, @d] : !commir.tile<f32>
        commir.reduce add %t2 into @Z[(@m0 + @p) mod 2, @c, @mt, @d] : !commir.tile<f32>
        commir.reduce add %t into @Y[(@m0 + @p) mod 2, @c, @mt, @d] : !commir.tile<f32>
      }
    }
  }
}
