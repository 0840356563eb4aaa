commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 4 spatial
  // expected-error@+1 {{join: '@X' does not bind '@b' directly before '@h'}}
  commir.buffer @X : [@h, @b] f32 in
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 4 spatial
  // expected-error@+1 {{join: '@X' uses only one of '@b' and '@h'}}
  commir.buffer @X : [@b] f32 in
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  // expected-note@+1 {{'@b' is declared here}}
  commir.axis @b = 2 spatial
  // expected-error@+1 {{join: '@b' is spatial but '@h' is managed (joined axes are of one kind)}}
  commir.axis @h = 4 managed
}

// -----

// An inner parallel loop under a plain outer one: the joined loop would be sequential and
// the inner loop's mapping onto the mesh dropped (it was, exit 0: every rank computed all).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 4 spatial
  commir.buffer @X : [@b, @h, @i] f32 in
  commir.buffer @Y : [@b, @h, @i] f32 out
  commir.for @b {
    // expected-error@+1 {{join: loops must be plain sequential loops, and the loop over '@h' is parallel}}
    commir.for @h parallel(0) {
      %x = commir.load @X[@b, @h, @i] : !commir.tile<f32>
      commir.store %x into @Y[@b, @h, @i] : !commir.tile<f32>
    }
  }
}
