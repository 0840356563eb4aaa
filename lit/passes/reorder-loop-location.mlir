// reorder interchanges two loops; each keeps its own location, so a later pass refusing one
// of them points at the line that wrote it (it pointed at the other loop's line).
// RUN: %mercury-opt %s --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(reorder{outer=i inner=j},parallelize{axis=j level=0})'
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 2 spatial
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @C : [@i, @j] f32 out
  commir.for @i {
    // expected-error@+1 {{parallelize: the loop over '@j' has 2 iterations but mesh level 0 has 4 devices}}
    commir.for @j {
      %a = commir.load @A[@i, @j] : !commir.tile<f32>
      commir.store %a into @C[@i, @j] : !commir.tile<f32>
    }
  }
}
