// RUN: %mercury-opt --tile="axis=i factor=4" --split-input-file --verify-diagnostics %s

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{tile: factor 4 does not divide the extent 30 of '@i'}}
  commir.axis @i = 30 spatial
  commir.buffer @A : [@i] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{tile: blocks of 16 along '@i' are below its minimum block 32}}
  commir.axis @i = 64 spatial min 32
  commir.buffer @A : [@i] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.axis @p = 4 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@p, @i] f32 out
  commir.for @p parallel(0) {
    commir.for @i {
      // expected-error@+1 {{tile: '@i' is used in a compound index expression here (tile before shifting)}}
      %a = commir.load @A[(@i + @p) mod 64] : !commir.tile<f32>
      commir.store %a into @C[@p, @i] : !commir.tile<f32>
    }
  }
}
