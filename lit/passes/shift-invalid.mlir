// RUN: %mercury-opt --shift="axis=j by=i" --split-input-file --verify-diagnostics %s

commir.mesh @m shape [4]
// expected-error@+1 {{shift: there is no loop over '@j'}}
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@j] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 8 managed
  commir.buffer @A : [@i] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  commir.for @i parallel(0) {
    // expected-error@+1 {{shift: '@j' has 8 steps but '@i' spreads over 4 ranks; tile it to 4 first}}
    commir.for @j {
      %b = commir.load @B[@j] : !commir.tile<f32>
      commir.reduce add %b into @C[@i] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @C : [@i, @j] f32 out
  commir.for @i parallel(0) {
    // expected-error@+1 {{shift: the loop over '@j' indexes no buffer shared across '@i'}}
    commir.for @j {
      %a = commir.load @A[@i, @j] : !commir.tile<f32>
      commir.store %a into @C[@i, @j] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @C : [@j] f32 out
  commir.for @i parallel(0) {
    commir.for @j {
      %a = commir.load @A[@i, @j] : !commir.tile<f32>
      // expected-error@+1 {{shift: this store into a buffer shared across '@i' would need communication (use a reduction)}}
      commir.store %a into @C[@j] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  // expected-error@+1 {{shift: '@i' is not a parallel loop (parallelize it first: the ranks' positions in it stagger '@j')}}
  commir.for @i {
    commir.for @j {
      %b = commir.load @B[@j] : !commir.tile<f32>
      commir.reduce add %b into @C[@i] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  // expected-error@+1 {{shift: the parallel loop over '@i' is inside the loop over '@j', not around it: a shifted loop runs inside the loop it is shifted by (interchange them first: reorder{outer=j inner=i})}}
  commir.for @j {
    commir.for @i parallel(0) {
      %b = commir.load @B[@j] : !commir.tile<f32>
      commir.reduce add %b into @C[@i] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  commir.buffer @D : [@j] f32 out
  commir.for @i parallel(0) {
    %b = commir.load @B[@i] : !commir.tile<f32>
    commir.store %b into @C[@i] : !commir.tile<f32>
  }
  // expected-error@+1 {{shift: the parallel loop over '@i' does not enclose the loop over '@j': a shifted loop runs inside the loop it is shifted by}}
  commir.for @j {
    %b = commir.load @B[@j] : !commir.tile<f32>
    commir.store %b into @D[@j] : !commir.tile<f32>
  }
}

// -----

// Each rank runs the shifted loop's iterations in another order: a store every iteration
// makes to one tile (the last one wins) would end with another value on some rank (found by a
// new-user pass: accepted, relative error 1.0 under --check).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.axis @j = 2 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@j, @c] f32 in
  commir.buffer @Y : [@i, @c] f32 out
  commir.for @i parallel(0) {
    commir.for @j {
      %a = commir.load @A[@j, @c] : !commir.tile<f32>
      // expected-error@+1 {{shift: this store into '@Y' touches the same tile in different iterations of '@j' (its indices do not determine '@j'): in another order (which iteration comes last, or reads what another wrote) the result changes}}
      commir.store %a into @Y[@i, @c] : !commir.tile<f32>
    }
  }
}

// -----

// A temp read before the iteration writes it takes the value another iteration left: not
// private to the iteration (lit/lowering/shifted-private-temp.mlir is the private case).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.axis @j = 2 spatial
  commir.axis @d = 4 spatial
  commir.buffer @Q : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @K : [@j, @d] f32 in
  commir.buffer @T : [@i, @d] f32 temp sharding [S(0), R]
  commir.buffer @C : [@i, @d] f32 out sharding [S(0), R]
  commir.for @i parallel(0) {
    commir.for @j {
      %q = commir.load @Q[@i, @d] : !commir.tile<f32>
      // expected-error@+1 {{shift: this load of '@T' and the store into it at the note touch the same tile in different iterations of '@j'}}
      %t = commir.load @T[@i, @d] : !commir.tile<f32>
      %e = commir.unary exp %q : !commir.tile<f32>
      // expected-note@+1 {{the other access is here}}
      commir.store %e into @T[@i, @d] : !commir.tile<f32>
      %k = commir.load @K[@j, @d] : !commir.tile<f32>
      %s = commir.matmul %t, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      %u = commir.matmul %s, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      commir.reduce add %u into @C[@i, @d] : !commir.tile<f32>
    }
  }
}

// -----

// A temp read after the loop holds what the last iteration wrote, which the shift changes.
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.axis @j = 2 spatial
  commir.axis @d = 4 spatial
  commir.buffer @Q : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @K : [@j, @d] f32 in
  commir.buffer @T : [@i, @d] f32 temp sharding [S(0), R]
  commir.buffer @C : [@i, @d] f32 out sharding [S(0), R]
  commir.for @i parallel(0) {
    commir.for @j {
      %q = commir.load @Q[@i, @d] : !commir.tile<f32>
      %e = commir.unary exp %q : !commir.tile<f32>
      // expected-error@+1 {{shift: this store into '@T' touches the same tile in different iterations of '@j'}}
      commir.store %e into @T[@i, @d] : !commir.tile<f32>
      %t = commir.load @T[@i, @d] : !commir.tile<f32>
      %k = commir.load @K[@j, @d] : !commir.tile<f32>
      %s = commir.matmul %t, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      %u = commir.matmul %s, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
      commir.reduce add %u into @C[@i, @d] : !commir.tile<f32>
    }
    %w = commir.load @T[@i, @d] : !commir.tile<f32>
    commir.reduce add %w into @C[@i, @d] : !commir.tile<f32>
  }
}
