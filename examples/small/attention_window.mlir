// Sliding-window attention (Mistral, Gemma): causal, each query sees itself and the 16 keys
// before it (flash-attn's window_size = (16, 0)), 256 positions on 8 GPUs of one node (32
// per shard). The window is static: a ring over it (--shift-shard) computes and sends only the
// key/value blocks some query of the rank can see (with a window shorter than a shard, the
// neighbour's).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, window = [16, 0]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
