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

// -----

// A loop around the whole body would repeat a reduction whose value does not use the axis
// (found by a new-user pass: @D came out doubled, exit 0 without --check).
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 managed
  commir.axis @q = 8 managed
  commir.axis @m = 8 spatial
  commir.axis @n = 8 spatial
  commir.buffer @A : [@m, @i] f32 in
  commir.buffer @B : [@i, @n] f32 in
  commir.buffer @A2 : [@m, @q] f32 in
  commir.buffer @B2 : [@q, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  commir.buffer @D : [@m, @n] f32 out
  %a = commir.load @A[@m, @i] : !commir.tile<f32>
  %b = commir.load @B[@i, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
  %a2 = commir.load @A2[@m, @q] : !commir.tile<f32>
  %b2 = commir.load @B2[@q, @n] : !commir.tile<f32>
  %d = commir.patch "gemm" (%a2, %b2) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  // expected-error@+1 {{tile: the loop over the 4 blocks of '@i' would enclose this reduction, whose value does not depend on '@i': it would be added 4 times}}
  commir.reduce add %d into @D[@m, @n] : !commir.tile<f32>
}
