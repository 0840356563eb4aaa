// An input of scripts/gpu.sh (part backward), the GPU check's shapes; kept out of examples/ (whose every file is snapshotted under every schedule).
// The backward of examples/attention.mlir: multi-head attention at Llama-3 shapes (batch 1,
// 32 heads, 32K context, head dim 128) on 8 GPUs of one node, everything sequence-sharded.
// Inputs: Q, K, V, the forward's output O and its gradient dO (bf16), the forward's
// log-sum-exp LSE (f32, natural log of the scaled logits); outputs dQ, dK, dV in f32. The
// local operator is one attention_bwd patch over whole tiles: dQ sums over the key positions
// (@j), dK and dV over the query positions (@i). `--shift-shard` gives the ring backward (the GPU check of scripts/gpu.sh, part backward):
// K and V travel, dK and dV partials return to their owners (shift-reduce).
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @h, @i, 128] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @h, @j, 128] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @h, @j, 128] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}
