// Packed documents (varlen): 256 tokens of several documents in one sequence, causal attention
// inside each document, for the CPU executor on 8 GPUs of one node. The document boundaries
// (@docs: prefix sums, flash-attn's cu_seqlens) are a run-time input: one compiled plan serves
// every batch, and `mercury-run --check` draws fresh ones with the inputs. Queries and keys are
// the same tokens, so one set of boundaries serves both (`documents = @docs`).
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
  commir.documents @docs positions 256
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, documents = @docs} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
