// The attention backward on 2 ranks, every buffer replicated (a schedule's input for
// shifted-reduce-parallel.mlir).
commir.mesh @mesh shape [2]
commir.kernel @attention_bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @hk, @i, 2] f64 in
  commir.buffer @K : [@b, @hk, @j, 2] f64 in
  commir.buffer @V : [@b, @hk, @j, 2] f64 in
  commir.buffer @O : [@b, @hk, @i, 2] f64 in
  commir.buffer @dO : [@b, @hk, @i, 2] f64 in
  commir.buffer @LSE : [@b, @hk, @i] f64 in
  commir.buffer @dQ : [@b, @hk, @i, 2] f64 out
  commir.buffer @dK : [@b, @hk, @j, 2] f64 out
  commir.buffer @dV : [@b, @hk, @j, 2] f64 out
  %q = commir.load @Q[@b, @hk, @i] : !commir.tile<f64>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f64>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f64>
  %o = commir.load @O[@b, @hk, @i] : !commir.tile<f64>
  %do = commir.load @dO[@b, @hk, @i] : !commir.tile<f64>
  %lse = commir.load @LSE[@b, @hk, @i] : !commir.tile<f64>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false} : (!commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}
