// Refusals of distribute{axis=m0} (lit/passes/distribute.mlir).
commir.mesh @mesh shape [2]
// expected-error@+1 {{distribute: there is no loop over '@m0'}}
commir.kernel @k on @mesh {
  commir.axis @m0 = 2 spatial
  commir.buffer @A : [@m0] f32 in
  commir.buffer @B : [@m0] f32 out
  %a = commir.load @A[@m0] : !commir.tile<f32>
  commir.store %a into @B[@m0] : !commir.tile<f32>
}

// -----

commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @m0 = 2 spatial
  commir.buffer @A : [@m0] f32 in
  commir.buffer @B : [@m0] f32 out
  // expected-error@+1 {{distribute: the body of the loop over '@m0' is one piece (each statement uses a value of the one before); nothing to distribute}}
  commir.for @m0 {
    %a = commir.load @A[@m0] : !commir.tile<f32>
    commir.store %a into @B[@m0] : !commir.tile<f32>
  }
}

// -----

// The second piece reads the tile the first piece writes in the other iteration.
commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @m0 = 2 spatial
  commir.axis @n = 2 spatial
  commir.buffer @A : [@m0, @n] f32 in
  commir.buffer @T : [@m0, @n] f32 temp
  commir.buffer @B : [@m0, @n] f32 out
  commir.for @m0 {
    commir.for @n {
      %a = commir.load @A[@m0, @n] : !commir.tile<f32>
      // expected-note@+1 {{the other access is here}}
      commir.store %a into @T[@m0, @n] : !commir.tile<f32>
      // expected-error@+1 {{distribute: '@T' is written by one piece of the loop body and accessed by another, but not at the same tile (a dependence between iterations could be reversed)}}
      %t = commir.load @T[@n, @m0] : !commir.tile<f32>
      commir.store %t into @B[@m0, @n] : !commir.tile<f32>
    }
  }
}

// -----

// Every iteration over @n writes the same tile of @T.
commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @m0 = 2 spatial
  commir.axis @n = 2 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@m0, @n, @c] f32 in
  commir.buffer @T : [@m0, @c] f32 temp
  commir.buffer @B : [@m0, @n, @c] f32 out
  commir.for @m0 {
    commir.for @n {
      %a = commir.load @A[@m0, @n, @c] : !commir.tile<f32>
      // expected-error@+1 {{distribute: '@T' passes data between pieces of the loop body, but its index list leaves out the loop over '@n' (every iteration would touch the same tile)}}
      commir.store %a into @T[@m0, @c] : !commir.tile<f32>
      %t = commir.load @T[@m0, @c] : !commir.tile<f32>
      commir.store %t into @B[@m0, @n, @c] : !commir.tile<f32>
    }
  }
}

// -----

// An index that gives two iterations of the nest the same tile of @T: (0, 1) and (1, 0).
commir.mesh @mesh shape [2]
commir.kernel @k on @mesh {
  commir.axis @m0 = 2 spatial
  commir.axis @n = 2 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@m0, @n, @c] f32 in
  commir.buffer @T : [@m0, @c] f32 temp
  commir.buffer @B : [@m0, @n, @c] f32 out
  commir.for @m0 {
    commir.for @n {
      %a = commir.load @A[@m0, @n, @c] : !commir.tile<f32>
      // expected-error@+1 {{distribute: '@T' passes data between pieces of the loop body, but its index '(@m0 + @n) mod 2' may give two iterations of the nest the same tile}}
      commir.store %a into @T[(@m0 + @n) mod 2, @c] : !commir.tile<f32>
      %t = commir.load @T[(@m0 + @n) mod 2, @c] : !commir.tile<f32>
      commir.store %t into @B[@m0, @n, @c] : !commir.tile<f32>
    }
  }
}
