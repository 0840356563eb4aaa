// An input of scripts/gpu.sh (part backward), the GPU check's shapes; kept out of examples/ (whose every file is snapshotted under every schedule).
// The backward of examples/attention_gqa.mlir: grouped-query attention (32 query heads on 8
// key/value heads), 32K context, head dim 128, on 8 GPUs; dK and dV also sum over each group's
// four query heads. As examples/attention_bwd.mlir otherwise.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 8 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 128] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 128] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 128] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}
