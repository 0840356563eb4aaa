// RUN: %mercury-opt --parallelize="axis=i level=0" --split-input-file --verify-diagnostics %s

commir.mesh @m shape [4]
// expected-error@+1 {{parallelize: there is no loop over '@i' (tile it first)}}
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{parallelize: no buffer uses '@i', so distributing it does nothing}}
  commir.axis @i = 4 spatial
  commir.axis @j = 8 spatial
  commir.buffer @A : [@j] f32 in
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  // expected-error@+1 {{parallelize: the loop over '@i' has 4 iterations but mesh level 0 has 2 devices (tile it by 2 first)}}
  commir.for @i {
    %a = commir.load @A[@i] : !commir.tile<f32>
    commir.store %a into @C[@i] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 reduction
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{parallelize: cannot distribute '@i': it is a plain reduction axis}}
  commir.for @i {
    %a = commir.load @A[@i] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [4, 4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @p = 4 spatial
  commir.buffer @A : [@p, @i] f32 in
  commir.buffer @C : [@p, @i] f32 out
  commir.for @p parallel(0) {
    // expected-error@+1 {{mesh level 0 is already used by an enclosing parallel loop}}
    commir.for @i {
      %a = commir.load @A[@p, @i] : !commir.tile<f32>
      commir.store %a into @C[@p, @i] : !commir.tile<f32>
    }
  }
}

// -----

// Every iteration of @j stores into the same tile of @Y (the last one wins): on different
// devices each rank would keep its own (ranks 0-2 wrong under --check, the plan said "no
// communication").
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @X : [@i, @j] f32 in
  commir.buffer @Y : [@j] f32 out
  commir.for @i {
    %x = commir.load @X[@i, @j] : !commir.tile<f32>
    %r = commir.unary exp %x : !commir.tile<f32>
    // expected-error@+1 {{parallelize: this store into '@Y' touches the same tile in different iterations of '@i' (its indices do not determine '@i'): run on different devices, those iterations would race (index the buffer by '@i', or keep the loop sequential)}}
    commir.store %r into @Y[@j] : !commir.tile<f32>
  }
}
