// An input of scripts/gpu.sh (part backward), the GPU check's shapes; kept out of examples/ (whose every file is snapshotted under every schedule).
// The backward of examples/attention_causal_zigzag.mlir: causal attention at Llama-3 shapes
// with the sequence in zigzag placement (GPU r holds chunks r and 15 - r of 2K), so every GPU
// gets the same share of the mask's work; `--shift-shard` gives the balanced ring backward.
// As examples/attention_bwd.mlir otherwise.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dO : [@b, @h, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, S(zigzag(0))]
  commir.buffer @dQ : [@b, @h, @i, 128] f32 out sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dK : [@b, @h, @j, 128] f32 out sharding [R, R, S(zigzag(0)), R]
  commir.buffer @dV : [@b, @h, @j, 128] f32 out sharding [R, R, S(zigzag(0)), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o = commir.load @O[@b, @h, @i] : !commir.tile<bf16>
  %do = commir.load @dO[@b, @h, @i] : !commir.tile<bf16>
  %lse = commir.load @LSE[@b, @h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @h, @j] : !commir.tile<f32>
}
