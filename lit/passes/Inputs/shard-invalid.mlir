commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @j = 32 managed
  // expected-error@+1 {{shard: no loop over '@j' to take a mesh level from (give level=)}}
  commir.buffer @B : [@j] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 managed
  commir.axis @j = 32 managed
  // expected-error@+1 {{shard: '@B' is not bound to axis '@j'}}
  commir.buffer @B : [@i] f32 in
}

// -----

commir.mesh @m shape [4]
// expected-error@+1 {{shard: '@B' is not a buffer of '@k'}}
commir.kernel @k on @m {
  commir.axis @j = 32 managed
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @j = 4 managed
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@j] f32 out
  // expected-error@+1 {{shard: the loop over '@j' is neither parallel nor shifted (give level=)}}
  commir.for @j {
    %b = commir.load @B[@j] : !commir.tile<f32>
    commir.store %b into @C[@j] : !commir.tile<f32>
  }
}
