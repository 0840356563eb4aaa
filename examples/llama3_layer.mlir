// One Llama-3 8B decoder layer as a module of eight kernels on 8 GPUs of one node: model
// dim 4096, 32 query heads in 8 groups of 4 sharing a key/value head, head dim 128, MLP hidden
// dim 14336, 8192 tokens, bf16 activations and weights, f32 arithmetic (the norms' weights and
// the rotary tables in f32). The same layer as examples/small/llama3_layer.mlir (which the CPU
// executor runs; see docs/dialect.md, "Modules of several kernels"), at sizes the CPU executor
// cannot run: `mercury-run examples/llama3_layer.mlir --module --no-run --backend cpu` parses, verifies and
// lowers it (with `--schedule examples/schedules/llama3_layer_cp.sched` or `_tp.sched`).
// Generated from the small layer's structure; every activation sequence-sharded, every weight
// replicated.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attn_norm on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 spatial
  commir.buffer @X : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @Wn1 : [@e] f32 in sharding [R]
  commir.buffer @Xn : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  %x = commir.load @X[@b, @i, @e] : !commir.tile<bf16>
  %xf = commir.cast %x : !commir.tile<bf16> to !commir.tile<f32>
  %sq = commir.binary mul %xf, %xf : !commir.tile<f32>
  %ss = commir.row_reduce sum %sq : !commir.tile<f32>
  %ms = commir.scale %ss by 0.000244140625 : !commir.tile<f32>
  %me = commir.add_scalar %ms, 1.0e-05 : !commir.tile<f32>
  %r = commir.unary rsqrt %me : !commir.tile<f32>
  %xr = commir.binary mul %xf, %r : !commir.tile<f32>
  %w = commir.load @Wn1[@e] : !commir.tile<f32>
  %y = commir.binary mul %xr, %w : !commir.tile<f32>
  %yb = commir.cast %y : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %yb into @Xn[@b, @i, @e] : !commir.tile<bf16>
}

commir.kernel @qkv_rope on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 managed
  commir.buffer @Xn : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @Wq : [@hk * @g, @e, 128] bf16 in sharding [R, R, R]
  commir.buffer @Wk : [@hk, @e, 128] bf16 in sharding [R, R, R]
  commir.buffer @Wv : [@hk, @e, 128] bf16 in sharding [R, R, R]
  commir.buffer @Cos : [@i, 128] f32 in sharding [S(0), R]
  commir.buffer @Sin : [@i, 128] f32 in sharding [S(0), R]
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @i, 128] bf16 out sharding [R, R, S(0), R]
  %x = commir.load @Xn[@b, @i, @e] : !commir.tile<bf16>
  %c = commir.load @Cos[@i] : !commir.tile<f32>
  %s = commir.load @Sin[@i] : !commir.tile<f32>
  %wq = commir.load @Wq[@hk, @g, @e] : !commir.tile<bf16>
  %q = commir.matmul %x, %wq : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %qc = commir.binary mul %q, %c : !commir.tile<f32>
  %qr = commir.rotate_half %q : !commir.tile<f32>
  %qs = commir.binary mul %qr, %s : !commir.tile<f32>
  %qo = commir.binary add %qc, %qs : !commir.tile<f32>
  %qb = commir.cast %qo : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %qb into @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %wk = commir.load @Wk[@hk, @e] : !commir.tile<bf16>
  %k = commir.matmul %x, %wk : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %kc = commir.binary mul %k, %c : !commir.tile<f32>
  %kr = commir.rotate_half %k : !commir.tile<f32>
  %ks = commir.binary mul %kr, %s : !commir.tile<f32>
  %ko = commir.binary add %kc, %ks : !commir.tile<f32>
  %kb = commir.cast %ko : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %kb into @K[@b, @hk, @i] : !commir.tile<bf16>
  %wv = commir.load @Wv[@hk, @e] : !commir.tile<bf16>
  %v = commir.matmul %x, %wv : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %vb = commir.cast %v : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %vb into @V[@b, @hk, @i] : !commir.tile<bf16>
}

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 8192 spatial
  commir.axis @j = 8192 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}

commir.kernel @o_proj on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 managed
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 spatial
  commir.buffer @O : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @Wo : [@h, 128, @e] bf16 in sharding [R, R, R]
  commir.buffer @A : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  commir.for @h {
    %o = commir.load @O[@b, @h, @i] : !commir.tile<bf16>
    %w = commir.load @Wo[@h, @e] : !commir.tile<bf16>
    %y = commir.matmul %o, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
    commir.reduce add %y into @A[@b, @i, @e] : !commir.tile<f32>
  }
}

commir.kernel @ffn_norm on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 spatial
  commir.buffer @X : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @A : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @Wn2 : [@e] f32 in sharding [R]
  commir.buffer @H : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  commir.buffer @Hn : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  %x = commir.load @X[@b, @i, @e] : !commir.tile<bf16>
  %a = commir.load @A[@b, @i, @e] : !commir.tile<bf16>
  %x32 = commir.cast %x : !commir.tile<bf16> to !commir.tile<f32>
  %a32 = commir.cast %a : !commir.tile<bf16> to !commir.tile<f32>
  %h = commir.binary add %x32, %a32 : !commir.tile<f32>
  %hb = commir.cast %h : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %hb into @H[@b, @i, @e] : !commir.tile<bf16>
  %sq = commir.binary mul %h, %h : !commir.tile<f32>
  %ss = commir.row_reduce sum %sq : !commir.tile<f32>
  %ms = commir.scale %ss by 0.000244140625 : !commir.tile<f32>
  %me = commir.add_scalar %ms, 1.0e-05 : !commir.tile<f32>
  %r = commir.unary rsqrt %me : !commir.tile<f32>
  %xr = commir.binary mul %h, %r : !commir.tile<f32>
  %w = commir.load @Wn2[@e] : !commir.tile<f32>
  %y = commir.binary mul %xr, %w : !commir.tile<f32>
  %yb = commir.cast %y : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %yb into @Hn[@b, @i, @e] : !commir.tile<bf16>
}

commir.kernel @gate_up on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 managed
  commir.axis @f = 14336 spatial
  commir.buffer @Hn : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @Wg : [@e, @f] bf16 in sharding [R, R]
  commir.buffer @Wu : [@e, @f] bf16 in sharding [R, R]
  commir.buffer @Z : [@b, @i, @f] bf16 out sharding [R, S(0), R]
  %x = commir.load @Hn[@b, @i, @e] : !commir.tile<bf16>
  %wg = commir.load @Wg[@e, @f] : !commir.tile<bf16>
  %g = commir.matmul %x, %wg : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %wu = commir.load @Wu[@e, @f] : !commir.tile<bf16>
  %u = commir.matmul %x, %wu : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %sg = commir.unary silu %g : !commir.tile<f32>
  %z = commir.binary mul %sg, %u : !commir.tile<f32>
  %zb = commir.cast %z : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %zb into @Z[@b, @i, @f] : !commir.tile<bf16>
}

commir.kernel @down on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 8192 spatial
  commir.axis @f = 14336 managed
  commir.axis @e = 4096 spatial
  commir.buffer @Z : [@b, @i, @f] bf16 in sharding [R, S(0), R]
  commir.buffer @Wd : [@f, @e] bf16 in sharding [R, R]
  commir.buffer @D : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  %z = commir.load @Z[@b, @i, @f] : !commir.tile<bf16>
  %w = commir.load @Wd[@f, @e] : !commir.tile<bf16>
  %y = commir.matmul %z, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %y into @D[@b, @i, @e] : !commir.tile<f32>
}

commir.kernel @residual on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 8192 spatial
  commir.axis @e = 4096 spatial
  commir.buffer @H : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @D : [@b, @i, @e] bf16 in sharding [R, S(0), R]
  commir.buffer @Y : [@b, @i, @e] bf16 out sharding [R, S(0), R]
  %h = commir.load @H[@b, @i, @e] : !commir.tile<bf16>
  %d = commir.load @D[@b, @i, @e] : !commir.tile<bf16>
  %h32 = commir.cast %h : !commir.tile<bf16> to !commir.tile<f32>
  %d32 = commir.cast %d : !commir.tile<bf16> to !commir.tile<f32>
  %y = commir.binary add %h32, %d32 : !commir.tile<f32>
  %yb = commir.cast %y : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %yb into @Y[@b, @i, @e] : !commir.tile<bf16>
}
