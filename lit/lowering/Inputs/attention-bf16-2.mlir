// A small bf16 attention on 2 GPUs (2 heads, 64 positions, head dim 16), sequence-sharded.
commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @h, @i, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
