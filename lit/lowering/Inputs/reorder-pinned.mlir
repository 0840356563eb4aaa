// Y[(a + b) mod 2, b] = exp(X[a, b]): every (a, b) writes its own tile.
commir.mesh @mesh shape [2] names ["gpu"]
commir.kernel @pinned on @mesh {
  commir.axis @a = 2 spatial
  commir.axis @b = 2 spatial
  commir.axis @c = 3 spatial
  commir.buffer @X : [@a, @b, @c] f32 in
  commir.buffer @Y : [@a, @b, @c] f32 out
  commir.for @a {
    commir.for @b {
      %x = commir.load @X[@a, @b, @c] : !commir.tile<f32>
      %y = commir.unary exp %x : !commir.tile<f32>
      commir.store %y into @Y[(@a + @b) mod 2, @b, @c] : !commir.tile<f32>
    }
  }
}
