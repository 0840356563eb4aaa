// Refusals of the compute ops' rules (lit/commir/compute.mlir runs this file).

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@i, @d] f32 in
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %b = commir.load @B[@i, @d] : !commir.tile<f32>
  // expected-error@+1 {{commir.matmul: a's contracted dimension covers @d but b's covers @i (a [@i, @d] (8 x 4), b [@i, @d] (8 x 4); a [n, k] right operand needs 'transpose_b')}}
  %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@d, @i] bf16 in
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %b = commir.load @B[@d, @i] : !commir.tile<bf16>
  // expected-error@+1 {{matmul operands must share an element type, got '!commir.tile<f32>' and '!commir.tile<bf16>'}}
  %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<bf16>) -> !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 spatial
  commir.axis @d = 4 managed
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@j, @d] f32 in
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %b = commir.load @B[@j, @d] : !commir.tile<f32>
  // expected-error@+1 {{commir.binary: operands must have the same tile, one the other's without its last dimension (one value per row), or one the other's last dimensions (broadcast over the leading ones); got [@i, @d] (8 x 4) and [@j, @d] (8 x 4)}}
  %c = commir.binary add %a, %b : !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@d, @n] f32 in
  commir.buffer @C : [@i, @n] f32 out
  commir.for @d {
    %a = commir.load @A[@i, @d] : !commir.tile<f32>
    %b = commir.load @B[@d, @n] : !commir.tile<f32>
    %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{commir.unary: the operand is only a partial sum (its contraction is split by loop '@d'), and 'exp' of a partial sum is not a partial result: reduce it first}}
    %e = commir.unary exp %c : !commir.tile<f32>
    commir.reduce add %e into @C[@i, @n] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@d, @n] f32 in
  commir.buffer @C : [@i, @n] f32 out
  commir.for @d {
    %a = commir.load @A[@i, @d] : !commir.tile<f32>
    %b = commir.load @B[@d, @n] : !commir.tile<f32>
    %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    %d = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{commir.binary: 'mul' of two partial sums, both split by loop '@d', is not a partial result: reduce them first}}
    %e = commir.binary mul %c, %d : !commir.tile<f32>
    commir.reduce add %e into @C[@i, @n] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@d, @n] f32 in
  commir.buffer @D : [@i, @n] f32 in
  commir.buffer @C : [@i, @n] f32 out
  commir.for @d {
    %a = commir.load @A[@i, @d] : !commir.tile<f32>
    %b = commir.load @B[@d, @n] : !commir.tile<f32>
    %x = commir.load @D[@i, @n] : !commir.tile<f32>
    %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{commir.binary: 'div' by a partial sum (split by loop '@d') is not a partial result: reduce it first}}
    %e = commir.binary div %x, %c : !commir.tile<f32>
    commir.reduce add %e into @C[@i, @n] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@i, @d] f32 in
  commir.buffer @B : [@d, @n] f32 in
  commir.buffer @D : [@i, @n] f32 in
  commir.buffer @C : [@i, @n] f32 out
  commir.for @d {
    %a = commir.load @A[@i, @d] : !commir.tile<f32>
    %b = commir.load @B[@d, @n] : !commir.tile<f32>
    %x = commir.load @D[@i, @n] : !commir.tile<f32>
    %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{commir.binary: 'add' of a partial sum (split by loop '@d') and a complete tile is not a partial result: reduce it first}}
    %e = commir.binary add %c, %x : !commir.tile<f32>
    commir.reduce add %e into @C[@i, @n] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{commir.mask: a mask needs [.., query, key] tiles, got [@i] (8)}}
  %c = commir.mask causal %a : !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{'commir.unary' requires every operand and result to have the same type, got '!commir.tile<f32>' and '!commir.tile<bf16>'}}
  %c = "commir.unary"(%a) {kind = "exp"} : (!commir.tile<f32>) -> !commir.tile<bf16>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{attribute 'kind': expected one of exp, log, gelu, silu, rsqrt, found 'tanh'}}
  %c = commir.unary tanh %a : !commir.tile<f32>
}

// -----

// Tiles that print alike but are different loop blocks: the message names the blocks.
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @f0 = 2 managed
  commir.axis @m0 = 2 spatial
  commir.axis @c = 4 spatial
  commir.buffer @A : [@m0, @c] f32 in
  commir.buffer @W : [@f0, @c] f32 in
  commir.buffer @B : [@m0, @f0, @c] f32 out
  commir.for @f0 parallel(0) {
    commir.for @m0 {
      %a = commir.load @A[@m0, @c] : !commir.tile<f32>
      %w = commir.load @W[@f0, @c] : !commir.tile<f32>
      // expected-error@+1 {{got [1, @c] (1 x 4) at blocks [@m0; -] and [1, @c] (1 x 4) at blocks [@f0; -]}}
      %p = commir.binary mul %a, %w : !commir.tile<f32>
      commir.store %p into @B[@m0, @f0, @c] : !commir.tile<f32>
    }
  }
}
