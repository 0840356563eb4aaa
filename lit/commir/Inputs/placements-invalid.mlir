// Placements that do not fit: every refusal names the buffer, the dimension and the level.

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 12 spatial
  // expected-error@+1 {{dimension 0 of '@A' (size 12): 12 positions do not divide into the 8 zigzag chunks of mesh level 0}}
  commir.buffer @A : [@i] f32 in sharding [S(zigzag(0))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{dimension 0 of '@A' (size 16): 16 positions do not divide into rounds of 4 striped blocks of 8 of mesh level 0}}
  commir.buffer @A : [@i] f32 in sharding [S(striped(0, 8))]
}

// -----

commir.mesh @m shape [2, 2]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  commir.axis @j = 16 spatial
  // expected-error@+1 {{mesh dimension 0 has two placements, zigzag and block (one placement per level)}}
  commir.buffer @A : [@i, @j] f32 in sharding [S(zigzag(0)), S(0)]
}

// -----

commir.mesh @m shape [2, 2]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  commir.axis @j = 16 spatial
  // expected-error@+1 {{sharding of '@A' uses mesh level 1 twice}}
  commir.buffer @A : [@i, @j] f32 in sharding [S(zigzag(1)), S(zigzag(1))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 48 spatial
  // expected-error@+1 {{dimension 0 of '@A' (size 48): 48 positions do not divide into rounds of 8 zigzag chunks of 4 of mesh level 0}}
  commir.buffer @A : [@i] f32 in sharding [S(zigzag(0, 4))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{the zigzag chunk must be a positive integer, found number '0'}}
  commir.buffer @A : [@i] f32 in sharding [S(zigzag(0, 0))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{zigzag takes a mesh dimension and optionally a chunk: zigzag(0) or zigzag(0, 512)}}
  commir.buffer @A : [@i] f32 in sharding [S(zigzag(0, 2, 2))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{the striped block must be a positive integer, found number '0'}}
  commir.buffer @A : [@i] f32 in sharding [S(striped(0, 0))]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{expected a mesh dimension, zigzag(level), zigzag(level, chunk) or striped(level, block), found 'spiral'}}
  commir.buffer @A : [@i] f32 in sharding [S(spiral(0))]
}

// -----

// A separator other than ',' names what follows the level (it said "found number '0'").
commir.mesh @m shape [2, 2]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{expected ',' between the mesh dimensions of S(...) (as in S(0, 1)), found '|' after number '0'}}
  commir.buffer @A : [@i] f32 in sharding [S(0|1)]
}


// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{sharding level '["zigzag", 0, 2, 2]' must be a mesh dimension or ["zigzag", level(, chunk)] / ["striped", level, block]}}
  "commir.buffer"() {sym_name = "A", dims = [[@i]], dtype = f32, role = "in", sharding = [[["zigzag", 0, 2, 2]]]} : () -> ()
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{dimension 0 of '@A' (size 16): 16 positions do not divide into rounds of 4 striped blocks of 8 of mesh level 0}}
  commir.reshard @A to [S(striped(0, 8))]
}
