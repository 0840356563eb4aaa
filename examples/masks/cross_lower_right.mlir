// Cross-attention of packed documents on the GPU with flash-attn's bottom-right alignment: 4K
// query tokens and 16K key tokens, each in as many documents (@dq, @dk: run-time boundaries that
// pair up document by document), causal from each document's end (a document's last query
// sees all of its keys), 8 heads of dim 128, bf16, on 8 GPUs of one node.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @cross_attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 4096 spatial min 128
  commir.axis @j = 16384 managed min 128
  commir.buffer @Q : [@b, @h, @i, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 128] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 128] bf16 out sharding [R, R, S(0), R]
  commir.documents @dq positions 4096
  commir.documents @dk positions 16384
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, documents = [@dq, @dk], lower_right = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
