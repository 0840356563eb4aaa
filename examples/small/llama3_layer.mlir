// One Llama-3 decoder layer as a module of eight kernels, at sizes the CPU executor runs in
// seconds (f32, 128 tokens, model dim 128, 16 query heads in 8 groups of 2 sharing a key/value
// head, head dim 8, MLP hidden dim 256), on 8 GPUs of one node. The kernels run in module
// order and are joined by the buffers between them: a buffer one kernel writes (`out`) and a
// later one reads (`in`) is an edge, declared alike at both ends (shape, element type,
// placement); where the placements differ, the edge is resharded (docs/dialect.md,
// "Modules of several kernels"). As written, every activation is sequence-sharded (16 tokens
// per GPU) and every weight replicated; the schedules of examples/schedules/llama3_layer_*.sched
// choose other placements and loop mappings (context parallelism with a ring, Megatron tensor
// and sequence parallelism, Ulysses). The Llama-3-8B and 70B sizes are
// examples/llama3_layer.mlir and examples/llama3_layer_70b.mlir.
//
//   Xn = RMSNorm(X) w1            H  = X + A, Hn = RMSNorm(H) w2
//   Q, K = RoPE(Xn Wq, Xn Wk)      Z  = SiLU(Hn Wg) * (Hn Wu)
//   V = Xn Wv                      Y  = H + Z Wd
//   O = attention(Q, K, V) causal, grouped-query
//   A = O Wo (a sum over the heads)
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

// RMSNorm: x / sqrt(mean(x^2) + eps) * w, the weight broadcast over the tokens.
commir.kernel @attn_norm on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 128 spatial
  commir.axis @e = 128 spatial
  commir.buffer @X : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @Wn1 : [@e] f32 in sharding [R]
  commir.buffer @Xn : [@b, @i, @e] f32 out sharding [R, S(0), R]
  %x = commir.load @X[@b, @i, @e] : !commir.tile<f32>
  %sq = commir.binary mul %x, %x : !commir.tile<f32>
  %ss = commir.row_reduce sum %sq : !commir.tile<f32>
  %ms = commir.scale %ss by 0.0078125 : !commir.tile<f32>
  %me = commir.add_scalar %ms, 1.0e-05 : !commir.tile<f32>
  %r = commir.unary rsqrt %me : !commir.tile<f32>
  %xr = commir.binary mul %x, %r : !commir.tile<f32>
  %w = commir.load @Wn1[@e] : !commir.tile<f32>
  %y = commir.binary mul %xr, %w : !commir.tile<f32>
  commir.store %y into @Xn[@b, @i, @e] : !commir.tile<f32>
}

// The QKV projection (one [e, 8] matrix per head, the rows broadcast over the heads) and
// rotary position embeddings on Q and K: q cos + rotate_half(q) sin, the tables indexed by
// the token position.
commir.kernel @qkv_rope on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 128 spatial
  commir.axis @e = 128 managed
  commir.buffer @Xn : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @Wq : [@hk * @g, @e, 8] f32 in sharding [R, R, R]
  commir.buffer @Wk : [@hk, @e, 8] f32 in sharding [R, R, R]
  commir.buffer @Wv : [@hk, @e, 8] f32 in sharding [R, R, R]
  commir.buffer @Cos : [@i, 8] f32 in sharding [S(0), R]
  commir.buffer @Sin : [@i, 8] f32 in sharding [S(0), R]
  commir.buffer @Q : [@b, @hk * @g, @i, 8] f32 out sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @i, 8] f32 out sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @i, 8] f32 out sharding [R, R, S(0), R]
  %x = commir.load @Xn[@b, @i, @e] : !commir.tile<f32>
  %c = commir.load @Cos[@i] : !commir.tile<f32>
  %s = commir.load @Sin[@i] : !commir.tile<f32>
  %wq = commir.load @Wq[@hk, @g, @e] : !commir.tile<f32>
  %q = commir.matmul %x, %wq : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %qc = commir.binary mul %q, %c : !commir.tile<f32>
  %qr = commir.rotate_half %q : !commir.tile<f32>
  %qs = commir.binary mul %qr, %s : !commir.tile<f32>
  %qo = commir.binary add %qc, %qs : !commir.tile<f32>
  commir.store %qo into @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %wk = commir.load @Wk[@hk, @e] : !commir.tile<f32>
  %k = commir.matmul %x, %wk : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %kc = commir.binary mul %k, %c : !commir.tile<f32>
  %kr = commir.rotate_half %k : !commir.tile<f32>
  %ks = commir.binary mul %kr, %s : !commir.tile<f32>
  %ko = commir.binary add %kc, %ks : !commir.tile<f32>
  commir.store %ko into @K[@b, @hk, @i] : !commir.tile<f32>
  %wv = commir.load @Wv[@hk, @e] : !commir.tile<f32>
  %v = commir.matmul %x, %wv : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.store %v into @V[@b, @hk, @i] : !commir.tile<f32>
}

// Causal grouped-query attention (query head h reads key/value head h / 2).
commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 128 spatial
  commir.axis @j = 128 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 8] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// The output projection: a sum over the heads of each head's output times its [8, e] block
// of Wo (the loop over @h accumulates; split over GPUs it is Megatron's row-parallel linear).
commir.kernel @o_proj on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 16 managed
  commir.axis @i = 128 spatial
  commir.axis @e = 128 spatial
  commir.buffer @O : [@b, @h, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @Wo : [@h, 8, @e] f32 in sharding [R, R, R]
  commir.buffer @A : [@b, @i, @e] f32 out sharding [R, S(0), R]
  commir.for @h {
    %o = commir.load @O[@b, @h, @i] : !commir.tile<f32>
    %w = commir.load @Wo[@h, @e] : !commir.tile<f32>
    %y = commir.matmul %o, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    commir.reduce add %y into @A[@b, @i, @e] : !commir.tile<f32>
  }
}

// The residual add, then RMSNorm before the MLP.
commir.kernel @ffn_norm on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 128 spatial
  commir.axis @e = 128 spatial
  commir.buffer @X : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @A : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @Wn2 : [@e] f32 in sharding [R]
  commir.buffer @H : [@b, @i, @e] f32 out sharding [R, S(0), R]
  commir.buffer @Hn : [@b, @i, @e] f32 out sharding [R, S(0), R]
  %x = commir.load @X[@b, @i, @e] : !commir.tile<f32>
  %a = commir.load @A[@b, @i, @e] : !commir.tile<f32>
  %h = commir.binary add %x, %a : !commir.tile<f32>
  commir.store %h into @H[@b, @i, @e] : !commir.tile<f32>
  %sq = commir.binary mul %h, %h : !commir.tile<f32>
  %ss = commir.row_reduce sum %sq : !commir.tile<f32>
  %ms = commir.scale %ss by 0.0078125 : !commir.tile<f32>
  %me = commir.add_scalar %ms, 1.0e-05 : !commir.tile<f32>
  %r = commir.unary rsqrt %me : !commir.tile<f32>
  %hr = commir.binary mul %h, %r : !commir.tile<f32>
  %w = commir.load @Wn2[@e] : !commir.tile<f32>
  %y = commir.binary mul %hr, %w : !commir.tile<f32>
  commir.store %y into @Hn[@b, @i, @e] : !commir.tile<f32>
}

// SwiGLU's gate and up projections: SiLU(Hn Wg) * (Hn Wu).
commir.kernel @gate_up on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 128 spatial
  commir.axis @e = 128 managed
  commir.axis @f = 256 spatial
  commir.buffer @Hn : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @Wg : [@e, @f] f32 in sharding [R, R]
  commir.buffer @Wu : [@e, @f] f32 in sharding [R, R]
  commir.buffer @Z : [@b, @i, @f] f32 out sharding [R, S(0), R]
  %x = commir.load @Hn[@b, @i, @e] : !commir.tile<f32>
  %wg = commir.load @Wg[@e, @f] : !commir.tile<f32>
  %g = commir.matmul %x, %wg : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %wu = commir.load @Wu[@e, @f] : !commir.tile<f32>
  %u = commir.matmul %x, %wu : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %sg = commir.unary silu %g : !commir.tile<f32>
  %z = commir.binary mul %sg, %u : !commir.tile<f32>
  commir.store %z into @Z[@b, @i, @f] : !commir.tile<f32>
}

// The down projection.
commir.kernel @down on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 128 spatial
  commir.axis @f = 256 managed
  commir.axis @e = 128 spatial
  commir.buffer @Z : [@b, @i, @f] f32 in sharding [R, S(0), R]
  commir.buffer @Wd : [@f, @e] f32 in sharding [R, R]
  commir.buffer @D : [@b, @i, @e] f32 out sharding [R, S(0), R]
  %z = commir.load @Z[@b, @i, @f] : !commir.tile<f32>
  %w = commir.load @Wd[@f, @e] : !commir.tile<f32>
  %y = commir.matmul %z, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %y into @D[@b, @i, @e] : !commir.tile<f32>
}

// The second residual add: the layer's output, in its input's placement.
commir.kernel @residual on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 128 spatial
  commir.axis @e = 128 spatial
  commir.buffer @H : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @D : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @Y : [@b, @i, @e] f32 out sharding [R, S(0), R]
  %h = commir.load @H[@b, @i, @e] : !commir.tile<f32>
  %d = commir.load @D[@b, @i, @e] : !commir.tile<f32>
  %y = commir.binary add %h, %d : !commir.tile<f32>
  commir.store %y into @Y[@b, @i, @e] : !commir.tile<f32>
}
