// Causal multi-head attention, batch 1, 32 heads, 32K context, head dim 128, on 2 GPUs, in
// zigzag (head-tail) placement: the positions are cut into 4 chunks and GPU r holds chunks r and
// 3 - r (the contract of torch's context parallelism with load balancing, which the 2-GPU
// comparison runs against). `mercury-run --shift-shard` makes it a ring of 2 in which both GPUs
// do the same work at both steps.
commir.mesh @mesh shape [2] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 32 spatial
  commir.axis @i = 32768 spatial min 128
  commir.axis @j = 32768 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(zigzag(0)), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(zigzag(0)), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
