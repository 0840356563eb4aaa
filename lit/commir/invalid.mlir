// RUN: %mercury-opt --split-input-file --verify-diagnostics %s

commir.mesh @m shape [4]
// expected-error@+1 {{'@nomesh' does not name a commir.mesh in the module}}
commir.kernel @k on @nomesh {
}

// -----

// expected-error@+1 {{mesh dimensions must be positive}}
commir.mesh @m shape [4, 0]

// -----

// expected-error@+1 {{mesh has 2 dimensions but 1 names}}
commir.mesh @m shape [2, 2] names ["gpu"]

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{axis '@i' must have a positive extent, got 0}}
  commir.axis @i = 0 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{axis '@i' has 9223372036854775807 positions, more than an axis may have (2^40 = 1099511627776)}}
  commir.axis @i = 9223372036854775807 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{attribute 'extent': '18446744073709551615' is too large for a 64-bit integer (at most 9223372036854775807)}}
  commir.axis @i = 18446744073709551615 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{attribute 'extent': '-9223372036854775809' is too small for a 64-bit integer (at least -9223372036854775808)}}
  commir.axis @i = -9223372036854775809 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{attribute 'extent': '1.5' is not an integer}}
  commir.axis @i = 1.5 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  // expected-error@+1 {{attribute 'dims': '18446744073709551616' is too large for a dimension size (at most 9223372036854775807)}}
  commir.buffer @A : [@i, 18446744073709551616] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{min block 64 must be between 1 and the extent 32}}
  commir.axis @i = 32 spatial min 64
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{buffer '@A' uses '@j', which is not an axis declared before it in this kernel}}
  commir.buffer @A : [@i, @j] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{buffer '@A' binds axis '@i' twice}}
  commir.buffer @A : [@i, @i] f32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 30 spatial
  // expected-error@+1 {{dimension 0 of '@A' (size 30) does not divide into 4 shards}}
  commir.buffer @A : [@i] f32 in sharding [S(0)]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{sharding of '@A' uses mesh level 1, which does not exist: mesh '@m' has 1 level (0)}}
  commir.buffer @A : [@i] f32 in sharding [S(1)]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{sharding of '@A' has 2 entries but the buffer has 1 dimensions}}
  commir.buffer @A : [@i] f32 in sharding [R, R]
}

// -----

commir.mesh @m shape [2, 2]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.axis @j = 32 spatial
  // expected-error@+1 {{sharding of '@A' uses mesh level 0 twice}}
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), S(0)]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{element type must be a float type, got 'i32'}}
  commir.buffer @A : [@i] i32 in
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.axis @j = 32 spatial
  commir.buffer @A : [@i, @j] f32 in
  // expected-error@+1 {{'@A' is indexed by 2 axes but 1 indices were given}}
  %a = commir.load @A[@i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{load of '@A' must produce '!commir.tile<f32>', not '!commir.tile<bf16>'}}
  %a = commir.load @A[@i] : !commir.tile<bf16>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @C : [@i] f32 out
  // expected-error@+1 {{cannot load from '@C', an 'out' buffer}}
  %c = commir.load @C[@i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 32 spatial
  commir.buffer @A : [@i, @j] f32 in
  // expected-error@+1 {{index '@i' of '@A' must be '@j' (whole range) or use an enclosing loop axis}}
  %a = commir.load @A[@i, @i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{parallel loop '@i' has 8 iterations but mesh level 0 has 4 devices (tile first)}}
  commir.for @i parallel(0) {
    %a = commir.load @A[@i] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @d = 4 reduction
  commir.buffer @A : [@d] f32 in
  // expected-error@+1 {{cannot parallelize '@d': it is a plain reduction axis}}
  commir.for @d parallel(0) {
    %a = commir.load @A[@d] : !commir.tile<f32>
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@i, @j] f32 in
  commir.for @i {
    // expected-error@+1 {{loop '@j' is shifted by '@i', which is not an enclosing parallel loop}}
    commir.for @j shift(@i) {
      %a = commir.load @A[@i, @j] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
  commir.for @i {
    // expected-error@+1 {{axis '@i' is already iterated by an enclosing loop}}
    commir.for @i {
      %a = commir.load @A[@i] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{unknown patch kernel 'conv' (known: gemm, attention, attention_bwd)}}
  %c = commir.patch "conv" (%a) : (!commir.tile<f32>) -> !commir.tile<f32>
}

// -----

// A misspelt attribute is refused, not ignored (the attention would run without its mask);
// a dialect attribute (discardable, as upstream's) passes: the gemm below is refused for
// its second attribute, not its first.
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  // expected-error@+1 {{patch 'attention' has no attribute 'casual' (it takes causal, scale, window, documents, lower_right)}}
  %o, %l = commir.patch "attention" (%q, %k, %k) {casual = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i, 4] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{patch 'gemm' has no attribute 'causal' (it takes none)}}
  %c = commir.patch "gemm" (%a, %a) {mine.note = "kept", causal = true} : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{reduction 'lse_merge' takes 2 value(s), got 1}}
  commir.reduce lse_merge %a into @C[@i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i] f32 in
  %a = commir.load @A[@i] : !commir.tile<f32>
  // expected-error@+1 {{cannot write to '@A', an 'in' buffer}}
  commir.store %a into @A[@i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
// expected-error@+1 {{'commir.axis' must be inside a 'commir.kernel'}}
commir.axis @i = 32 spatial

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-note@-1 {{see existing symbol definition here}}
  // expected-error@+1 {{redefinition of symbol named 'i'}}
  commir.axis @i = 16 spatial
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  // expected-error@+1 {{attribute 'sharding': each dimension's sharding is 'R' (replicated) or 'S(mesh dims...)'}}
  commir.buffer @A : [@i] f32 in sharding [X]
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 32 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{attribute 'indices': 'mod' must be followed by a positive integer}}
  %a = commir.load @A[@i mod 0] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  // expected-error@+1 {{attribute 'kind': expected one of spatial, reduction, managed, found 'parallel'}}
  commir.axis @i = 32 parallel
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 16 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{attribute 'indices': '99999999999999999999' is too large for a 64-bit integer (at most 9223372036854775807)}}
  %a = commir.load @A[(@i + 99999999999999999999) mod 16] : !commir.tile<f32>
}

// -----

// A second block in a kernel was parsed, verified, printed, and never lowered (every op after
// the first block dropped, exit 0; thirteenth new-user pass): its regions hold one block.
"builtin.module"() ({
  "commir.mesh"() {sym_name = "m", shape = [2]} : () -> ()
  "commir.kernel"() ({
    "commir.axis"() {sym_name = "i", extent = 2, kind = "spatial"} : () -> ()
    "transform.yield"() : () -> ()
  ^bb1:
    // expected-error@+1 {{'commir.kernel' expects region #0 to have 0 or 1 blocks, got 2 (this is block #1)}}
    "commir.axis"() {sym_name = "j", extent = 2, kind = "spatial"} : () -> ()
    "transform.yield"() : () -> ()
  }) {sym_name = "k", mesh = @m} : () -> ()
}) : () -> ()

// -----

"builtin.module"() ({
  "commir.mesh"() {sym_name = "m", shape = [2]} : () -> ()
  "commir.kernel"() ({
  ^bb0(%x: i64):
    // expected-error@+1 {{'commir.kernel' region #0 should have no arguments}}
    "commir.axis"() {sym_name = "i", extent = 2, kind = "spatial"} : () -> ()
    "transform.yield"() : () -> ()
  }) {sym_name = "k", mesh = @m} : () -> ()
}) : () -> ()

// -----

commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.buffer @X : [@i] f32 in
  commir.buffer @Y : [@i] f32 out
  "commir.for"() ({
    %x = commir.load @X[@i] : !commir.tile<f32>
    "transform.yield"() : () -> ()
  ^bb1:
    // expected-error@+1 {{'commir.for' expects region #0 to have 0 or 1 blocks, got 2 (this is block #1)}}
    %y = commir.load @X[@i] : !commir.tile<f32>
    commir.store %y into @Y[@i] : !commir.tile<f32>
    "transform.yield"() : () -> ()
  }) {axis = @i} : () -> ()
}

// -----

// An integer of another width printed back as `8 : i32` in the custom form, which no parser
// reads as the i64 the dialect's integers are (thirteenth new-user pass). (`8 : i1` itself is
// out of range for an i1, refused by the parser as upstream refuses it.)
"builtin.module"() ({
  "commir.mesh"() {sym_name = "m", shape = [2]} : () -> ()
  "commir.kernel"() ({
    // expected-error@+1 {{axis '@i': attribute 'extent': '8 : i32' is not an integer of type i64}}
    "commir.axis"() {sym_name = "i", extent = 8 : i32, kind = "spatial"} : () -> ()
    "transform.yield"() : () -> ()
  }) {sym_name = "k", mesh = @m} : () -> ()
}) : () -> ()

// -----

// expected-error@+1 {{'commir.mesh' attribute 'shape' has the wrong kind of value '[2 : i32]' (expected an array of i64 integers)}}
"commir.mesh"() {sym_name = "m", shape = [2 : i32]} : () -> ()

// -----

// A float extent said "must have a positive extent, got 0".
"builtin.module"() ({
  "commir.mesh"() {sym_name = "m", shape = [2]} : () -> ()
  "commir.kernel"() ({
    // expected-error@+1 {{axis '@i': attribute 'extent': '8.0' is not an integer of type i64}}
    "commir.axis"() {sym_name = "i", extent = 8.0, kind = "spatial"} : () -> ()
    "transform.yield"() : () -> ()
  }) {sym_name = "k", mesh = @m} : () -> ()
}) : () -> ()

// -----

// A level name given twice made `level=gpu` pick level 0 silently.
// expected-error@+1 {{mesh level 1's name "gpu" names level 0 too (a pass option naming it would pick level 0)}}
commir.mesh @m shape [2, 4] names ["gpu", "gpu"]

// -----

// expected-error@+1 {{mesh level 0's name "1" reads as a level number}}
commir.mesh @m shape [2, 4] names ["1", "0"]

// -----

// expected-error@+1 {{mesh level 0's name "" is empty}}
commir.mesh @m shape [2] names [""]
