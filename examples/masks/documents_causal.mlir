// Packed documents on the GPU: 16K tokens of several documents in one sequence (flash-attn's
// varlen, cu_seqlens = @docs), causal inside each document, 8 heads of dim 128, bf16, on 8
// GPUs of one node (2K tokens per shard). The boundaries are a run-time input: one compiled plan
// serves every batch; `mercury-run --check` draws fresh ones (1-token documents, documents
// longer than a shard, hundreds of them, a padding tail) and `CudaExecutor::set_documents`
// takes them before a run.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 16384 spatial min 128
  commir.axis @j = 16384 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.documents @docs positions 16384
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, documents = @docs} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
