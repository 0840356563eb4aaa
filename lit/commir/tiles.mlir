// Tile shapes and patch contracts are checked by the verifier, before anything is lowered:
// what would compute wrong numbers or fail at execution is a located error here.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s | FileCheck %s

// A [64, 8] tile does not add into a [64] one.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.buffer @A : [@i, 8] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{reduce add: the value is a [@i, 8] (64 x 8) tile, which does not match the tile [@i] (64) of '@C'[@i]}}
  commir.reduce add %a into @C[@i] : !commir.tile<f32>
}

// -----

// An index over another loop picks one element, not the whole axis.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  commir.for @j {
    %a = commir.load @A[(@j * 16 + 3) mod 64] : !commir.tile<f32>
    // expected-error@+1 {{reduce add: the value is a [1] (1) tile, which does not match the tile [@i] (64) of '@C'[@i]}}
    commir.reduce add %a into @C[@i] : !commir.tile<f32>
  }
}

// -----

// A transposed weight: gemm contracts A's last dimension with B's first.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 16 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @W : [@n, @k] f32 in
  commir.buffer @C : [@m, @n] f32 out
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %w = commir.load @W[@n, @k] : !commir.tile<f32>
  // expected-error@+1 {{gemm: A's last dimension covers @k but B's leading dimension covers @n: the contracted dimension must be the same (B must be laid out [k, n]; a transposed [n, k] operand is not supported)}}
  %c = commir.patch "gemm" (%a, %w) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}

// -----

// The output's dimensions in the other order: the values would land transposed.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 8 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @B : [@k, @n] f32 in
  commir.buffer @C : [@n, @m] f32 out
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  // expected-error@+1 {{reduce add: the value is a [@m, @n] (8 x 8) tile, which does not match the tile [@n, @m] (8 x 8) of '@C'[@n, @m]}}
  commir.reduce add %c into @C[@n, @m] : !commir.tile<f32>
}

// -----

// A loop over k blocks makes the product a partial sum: storing it keeps only the last block.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 16 spatial
  commir.axis @k0 = 2 managed
  commir.axis @k_t = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@m, @k0 * @k_t] f32 in
  commir.buffer @B : [@k0 * @k_t, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  commir.for @k0 {
    %a = commir.load @A[@m, @k0, @k_t] : !commir.tile<f32>
    %b = commir.load @B[@k0, @k_t, @n] : !commir.tile<f32>
    %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{store: the value is only a partial result (its contraction is split by loop '@k0'); write it with 'commir.reduce add'}}
    commir.store %c into @C[@m, @n] : !commir.tile<f32>
  }
}

// -----

// The two operands pick different k blocks.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 16 spatial
  commir.axis @k0 = 2 managed
  commir.axis @k_t = 4 managed
  commir.axis @n = 8 spatial
  commir.buffer @A : [@m, @k0 * @k_t] f32 in
  commir.buffer @B : [@k0 * @k_t, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  commir.for @k0 {
    %a = commir.load @A[@m, @k0, @k_t] : !commir.tile<f32>
    %b = commir.load @B[(@k0 + 1) mod 2, @k_t, @n] : !commir.tile<f32>
    // expected-error@+1 {{gemm: A and B pick different blocks of the contracted dimension (A at [@k0], B at [(@k0 + 1) mod 2])}}
    %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
  }
}

// -----

// Attention needs the whole head dim: a loop over head-dim blocks splits the q.k product.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.axis @d0 = 2 spatial
  commir.axis @d_t = 8 spatial
  commir.buffer @Q : [@h, @i, @d0 * @d_t] f32 in
  commir.buffer @K : [@h, @j, @d0 * @d_t] f32 in
  commir.buffer @V : [@h, @j, @d0 * @d_t] f32 in
  commir.buffer @O : [@h, @i, @d0 * @d_t] f32 out
  commir.for @d0 {
    %q = commir.load @Q[@h, @i, @d0, @d_t] : !commir.tile<f32>
    %k = commir.load @K[@h, @j, @d0, @d_t] : !commir.tile<f32>
    %v = commir.load @V[@h, @j, @d0, @d_t] : !commir.tile<f32>
    // expected-error@+1 {{attention: the head dim of q is split (slot '@d0' indexed by '@d0'): the q.k product and its 1/sqrt(d) scale need the whole head dim in one patch}}
    %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
    commir.reduce lse_merge %o, %lse into @O[@h, @i, @d0, @d_t] : !commir.tile<f32>, !commir.tile<f32>
  }
}

// -----

// [b, s, h, d] tiles: dimension 1 would be read as the heads.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @b = 1 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.axis @h = 2 spatial
  commir.buffer @Q : [@b, @i, @h, 8] f32 in
  commir.buffer @K : [@b, @j, @h, 8] f32 in
  commir.buffer @V : [@b, @j, @h, 8] f32 in
  commir.buffer @O : [@b, @i, @h, 8] f32 out
  %q = commir.load @Q[@b, @i, @h] : !commir.tile<f32>
  %k = commir.load @K[@b, @j, @h] : !commir.tile<f32>
  %v = commir.load @V[@b, @j, @h] : !commir.tile<f32>
  // expected-error@+1 {{attention: dimension 1 must hold the heads: k's heads (@j at []) must be the leading part of q's (@i at []), with q's heads a multiple of k's (grouped-query attention); tiles are [batch, heads, sequence, head_dim]}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @i, @h] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// Query and key head dims must agree.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 16] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{attention: q and k must have the same head dim; q's covers 16 (16 elements), k's covers 8 (8 elements)}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// A partial softmax over key blocks is merged with lse_merge, never added.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j0 = 4 managed
  commir.axis @j_t = 4 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j0 * @j_t, 8] f32 in
  commir.buffer @V : [@h, @j0 * @j_t, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  commir.for @j0 {
    %q = commir.load @Q[@h, @i] : !commir.tile<f32>
    %k = commir.load @K[@h, @j0, @j_t] : !commir.tile<f32>
    %v = commir.load @V[@h, @j0, @j_t] : !commir.tile<f32>
    %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
    // expected-error@+1 {{reduce add: the value is a partial result over loop '@j0' that must be combined with lse_merge, not add}}
    commir.reduce add %o into @O[@h, @i] : !commir.tile<f32>
  }
}

// -----

// Sizes whose byte count overflows 64 bits are refused where they are declared.
commir.mesh @m shape [8]
commir.kernel @k on @m {
  commir.axis @a = 1048576 spatial
  commir.axis @b = 1048576 spatial
  commir.axis @c = 1048576 spatial
  // expected-error@+1 {{buffer '@Q' is too large: 1048576 x 1048576 x 1048576 x 1048576 elements of 4 bytes do not fit in 64 bits}}
  commir.buffer @Q : [@a, @b, @c, 1048576] f32 in
}

// -----

// Sizes past the 2^48 elements a plan holds are refused where they are declared (they were an
// "internal error: the lowered plan is invalid" at the kernel: new-user pass, 2026-12-03).
commir.mesh @m shape [8]
commir.kernel @k on @m {
  commir.axis @b = 1099511627776 spatial
  // expected-error@+1 {{buffer '@Q' is too large: 1099511627776 x 4 x 256 x 16 = 18014398509481984 elements, more than the 281474976710656 (2^48) a plan holds}}
  commir.buffer @Q : [@b, 4, 256, 16] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  // expected-error@+1 {{attribute 'sharding': mesh level 18446744073709551615 does not exist (no mesh has that many levels)}}
  commir.buffer @A : [@i] f32 in sharding [S(18446744073709551615)]
}

// -----

// Accepted: a value head dim (16) other than the query/key head dim (24): the output takes
// v's head dim; and grouped-query heads (2 key/value heads, groups of 4).
// CHECK-LABEL: commir.kernel @mla
// CHECK: commir.reduce lse_merge
commir.mesh @m shape [4]
commir.kernel @mla on @m {
  commir.axis @hk = 2 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@hk * @g, @i, 24] f32 in
  commir.buffer @K : [@hk, @j, 24] f32 in
  commir.buffer @V : [@hk, @j, 16] f32 in
  commir.buffer @O : [@hk * @g, @i, 16] f32 out
  %q = commir.load @Q[@hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// A row max over a split axis is block-local: it merges across blocks only as an attention
// output's log-sum-exp, and the message says so (it advised 'commir.reduce lse_merge' for a
// value that is no (o, lse) pair; ninth new-user pass).
commir.mesh @m shape [2]
commir.kernel @bc on @m {
  commir.axis @i_o = 2 spatial
  commir.axis @i_t = 4 spatial
  commir.buffer @V : [@i_o * @i_t] f32 in
  commir.buffer @Z : [@i_o * @i_t] f32 out
  commir.for @i_o {
    %v = commir.load @V[@i_o, @i_t] : !commir.tile<f32>
    %m = commir.row_reduce max %v : !commir.tile<f32>
    %z = commir.binary sub %m, %v : !commir.tile<f32>
    // expected-error@+1 {{store: the value is block-local (a max or softmax over an axis split by loop '@i_o'); only an attention output and its log-sum-exp merge across blocks ('commir.reduce lse_merge %o, %lse'): keep that axis whole (no loop over it), or compute the (o, lse) pair}}
    commir.store %z into @Z[@i_o, @i_t] : !commir.tile<f32>
  }
}
