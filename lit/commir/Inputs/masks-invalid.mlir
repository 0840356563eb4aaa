// Refusals of attention masks: windows, document boundaries and their alignment
// (lit/commir/masks.mlir).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'window' is [left, right] (two integers, -1 for unbounded), not 1 of them}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {window = [4]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{a window bound is -1 (unbounded) or >= 0, not -2}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {window = [-2, 0]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'window' must be [left, right], two integers (-1 for unbounded)}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {window = "wide"} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'@nope' does not name a commir.documents declaration of this kernel}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {documents = @nope} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  commir.documents @d positions 16
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'documents' must be @D (one set of boundaries for queries and keys) or [@Dq, @Dk]: commir.documents symbols}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {documents = [@d]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  // expected-note@+1 {{declared here}}
  commir.documents @d positions 12
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'@d' covers 12 positions, and the query sequence has 16}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {documents = @d} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  commir.documents @d positions 16
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{'lower_right' measures offsets from each document's end: it needs 'documents'}}
  %o, %lse = commir.patch "attention" (%q, %k, %v) {lower_right = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  // expected-error@+1 {{documents '@d' must cover between 1 and 2^40 positions, not 0}}
  commir.documents @d positions 0
}

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  commir.documents @d positions 16
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  commir.for @h {
    // expected-error@+1 {{'commir.documents' must be at the top of the kernel, not inside a loop}}
    commir.documents @e positions 16
  }
}
