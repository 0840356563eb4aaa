// Refusals of the attention backward and of a kept log-sum-exp (lit/commir/attention-bwd.mlir).
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 out
  commir.buffer @L : [@h, @i] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-error@+1 {{'lse @L' keeps the log-sum-exp of an lse_merge; a reduction 'add' has none}}
  commir.reduce add %o into @O[@h, @i] lse @L : !commir.tile<f32>
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
  commir.buffer @L : [@h, @i] bf16 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-error@+1 {{'lse @L' must be f32 or f64, not bf16}}
  commir.reduce lse_merge %o, %lse into @O[@h, @i] lse @L : !commir.tile<f32>, !commir.tile<f32>
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
  commir.buffer @L : [@i, @h] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-error@+1 {{'lse @L' must have the dimensions of '@O' without the last one, [@h, @i], not [@i, @h]}}
  commir.reduce lse_merge %o, %lse into @O[@h, @i] lse @L : !commir.tile<f32>, !commir.tile<f32>
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
  commir.buffer @L : [@h, @i] f32 in
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-error@+1 {{'lse @L': the log-sum-exp is written into an 'out' buffer, not an 'in' one}}
  commir.reduce lse_merge %o, %lse into @O[@h, @i] lse @L : !commir.tile<f32>, !commir.tile<f32>
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
  commir.buffer @L : [@h, @i] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-note@+1 {{the log-sum-exp is kept here}}
  commir.reduce lse_merge %o, %lse into @O[@h, @i] lse @L : !commir.tile<f32>, !commir.tile<f32>
  // expected-error@+1 {{'@L' keeps the log-sum-exp of '@O' (lse @L); it cannot be written otherwise}}
  commir.store %lse into @L[@h, @i] : !commir.tile<f32>
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
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{patch 'attention_bwd' takes 6 tiles and produces 3, got 3 and 3}}
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
}

// -----

// o must be the forward's output tile: here it is loaded along the key positions.
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @L : [@h, @i] f32 in
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %l = commir.load @L[@h, @i] : !commir.tile<f32>
  // expected-error@+1 {{attention_bwd: o is a [@h, @j, 8] (2 x 16 x 8) tile; it must be [@h, @i, 8] (2 x 16 x 8), the forward's output tile: q's with v's head dim, at the same blocks}}
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %v, %q, %l) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
}

// -----

// Split over the query positions, dk is a partial sum: a store would keep one block's.
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @L : [@h, @i] f32 in
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.for @i {
    %q = commir.load @Q[@h, @i] : !commir.tile<f32>
    %k = commir.load @K[@h, @j] : !commir.tile<f32>
    %v = commir.load @V[@h, @j] : !commir.tile<f32>
    %o = commir.load @O[@h, @i] : !commir.tile<f32>
    %l = commir.load @L[@h, @i] : !commir.tile<f32>
    %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %o, %l) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
    // expected-error@+1 {{store: the value is only a partial result (its contraction is split by loop '@i'); write it with 'commir.reduce add'}}
    commir.store %dk into @dK[@h, @j] : !commir.tile<f32>
  }
}
