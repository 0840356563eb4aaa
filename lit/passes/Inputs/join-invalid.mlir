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
