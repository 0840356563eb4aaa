// Multi-head attention with head dim 64 (Llama-2 7B-style heads, GPT-2): batch 1, 16 heads,
// 8K context, on 8 GPUs; inputs and output sequence-sharded. Small enough for the GPU
// script's odd-shape checks (scripts/gpu.sh, part schedules).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 16 spatial
  commir.axis @i = 8192 spatial
  commir.axis @j = 8192 managed
  commir.buffer @Q : [@b, @h, @i, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 64] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
