// Refusals of the layer's compute ops (lit/commir/layer-ops.mlir runs this file).

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 3 spatial
  commir.buffer @A : [@i, @d] f32 in
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  // expected-error@+1 {{commir.rotate_half: rotate_half needs rows of an even length; the last dimension covers @d (3 elements)}}
  %r = commir.rotate_half %a : !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d0 = 2 spatial
  commir.axis @d1 = 2 spatial
  commir.buffer @A : [@i, @d0 * @d1] f32 in
  commir.for @d0 {
    %a = commir.load @A[@i, @d0, @d1] : !commir.tile<f32>
    // expected-error@+1 {{commir.rotate_half: rotate_half pairs the two halves of each row, and the last dimension (@d1) is split by the index '@d0': keep it whole}}
    %r = commir.rotate_half %a : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @k = 4 managed
  commir.axis @n = 4 spatial
  commir.buffer @A : [@i, @k] f32 in
  commir.buffer @B : [@k, @n] f32 in
  commir.for @k {
    %a = commir.load @A[@i, @k] : !commir.tile<f32>
    %b = commir.load @B[@k, @n] : !commir.tile<f32>
    %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{commir.add_scalar: the operand is only a partial sum (its contraction is split by loop '@k'), and a constant added to it of a partial sum is not a partial result: reduce it first}}
    %d = commir.add_scalar %c, 1.0 : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @e = 4 spatial
  commir.buffer @A : [@i, @e] f32 in
  commir.buffer @W : [@i] f32 in
  %a = commir.load @A[@i, @e] : !commir.tile<f32>
  %w = commir.load @W[@i] : !commir.tile<f32>
  // A row tile: one value per row, fine.
  %b = commir.binary mul %a, %w : !commir.tile<f32>
  commir.buffer @V : [@e, @i] f32 in
  %v = commir.load @V[@e, @i] : !commir.tile<f32>
  // expected-error@+1 {{commir.binary: operands must have the same tile, one the other's without its last dimension (one value per row), or one the other's last dimensions (broadcast over the leading ones); got [@i, @e] (8 x 4) and [@e, @i] (4 x 8)}}
  %c = commir.binary add %a, %v : !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 3 spatial
  commir.axis @i = 8 spatial
  commir.axis @e = 4 managed
  commir.buffer @X : [@b, @i, @e] f32 in
  commir.buffer @W : [@b, @h, @e, 4] f32 in
  %x = commir.load @X[@b, @i, @e] : !commir.tile<f32>
  %w = commir.load @W[@b, @h, @e] : !commir.tile<f32>
  // Batch axes shared (@b) but out of line: neither right-aligned nor a product over both.
  // expected-error@+1 {{commir.matmul: batch dimension 1 of b covers @h at [], which is neither a's (@b at []), a leading part of it (grouped heads), nor one element, and a's is not one element either}}
  %q = commir.matmul %x, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
}
