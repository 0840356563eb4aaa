commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @a = 4 spatial
  commir.axis @b = 4 spatial
  commir.buffer @X : [@a, @b] f32 in
  commir.buffer @T : [@a] f32 temp
  commir.buffer @Y : [@a, @b] f32 out
  commir.for @a {
    commir.for @b {
      %x = commir.load @X[@a, @b] : !commir.tile<f32>
      // expected-error@+1 {{reorder: this access to '@T' depends on another (carried by both '@a' and '@b'); interchange could reverse it}}
      commir.store %x into @T[@a] : !commir.tile<f32>
      // expected-note@+1 {{the other access is here}}
      %t = commir.load @T[(@a + 1) mod 4] : !commir.tile<f32>
      commir.store %t into @Y[@a, @b] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @a = 4 spatial
  commir.axis @b = 4 spatial
  commir.buffer @X : [@a, @b] f32 in
  commir.buffer @Y : [@a, @b] f32 out
  // expected-error@+1 {{reorder: the loop over '@a' must contain exactly the loop over '@b'}}
  commir.for @a {
    %x0 = commir.load @X[@a, @b] : !commir.tile<f32>
    commir.for @b {
      %x = commir.load @X[@a, @b] : !commir.tile<f32>
      commir.store %x into @Y[@a, @b] : !commir.tile<f32>
    }
  }
}

// -----

// Tile 1 of @Y is written by (a, b) = (0, 1), then by (1, 0): (a + b) mod 2 determines @a
// only once @b is fixed, so the store meets itself in iterations that differ on both loops
// (the swap made (0, 1) win: relative error 0.57 under --check).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @a = 2 spatial
  commir.axis @b = 2 spatial
  commir.axis @c = 3 spatial
  commir.buffer @X : [@a, @b, @c] f32 in
  commir.buffer @Y : [@a, @c] f32 out
  commir.for @a {
    commir.for @b {
      %x = commir.load @X[@a, @b, @c] : !commir.tile<f32>
      %y = commir.unary exp %x : !commir.tile<f32>
      // expected-error@+1 {{reorder: this store into '@Y' touches the same tile in iterations that differ on both '@a' and '@b'; interchange could reverse their order}}
      commir.store %y into @Y[(@a + @b) mod 2, @c] : !commir.tile<f32>
    }
  }
}

// -----

// A temp loaded before the iteration stores it reads the previous iteration's value: not
// private (deps::private_to), so the interchange is refused.
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @a = 4 spatial
  commir.axis @b = 4 spatial
  commir.axis @one = 1 spatial
  commir.buffer @X : [@a, @b] f32 in
  commir.buffer @T : [@one] f32 temp
  commir.buffer @Y : [@a, @b] f32 out
  commir.for @a {
    commir.for @b {
      // expected-error@+1 {{reorder: this access to '@T' depends on another (carried by both '@a' and '@b'); interchange could reverse it}}
      %t = commir.load @T[@one] : !commir.tile<f32>
      commir.store %t into @Y[@a, @b] : !commir.tile<f32>
      %x = commir.load @X[@a, @b] : !commir.tile<f32>
      // expected-note@+1 {{the other access is here}}
      commir.store %x into @T[@one] : !commir.tile<f32>
    }
  }
}
