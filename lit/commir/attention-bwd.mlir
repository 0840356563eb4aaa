// The attention backward patch and the forward's kept log-sum-exp (`lse @L`) print to a fixed
// point and verify; the refusals are in Inputs/attention-bwd-invalid.mlir.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir > /dev/null
// RUN: %mercury-opt --split-input-file --verify-diagnostics %S/Inputs/attention-bwd-invalid.mlir

// CHECK: commir.reduce lse_merge %{{.*}}, %{{.*}} into @O[@b, @h, @i] lse @LSE : !commir.tile<f32>, !commir.tile<f32>
// CHECK: commir.patch "attention_bwd" (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {causal = true}
// CHECK: commir.reduce add %{{.*}} into @dK[@b, @hk, @j] : !commir.tile<f32>

commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @fwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@b, @h, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 8] f32 out sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @h, @i] f32 out sharding [R, R, S(0)]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] lse @LSE : !commir.tile<f32>, !commir.tile<f32>
}

// Grouped-query (4 query heads on 2 key/value heads) with a value head dim of 4 (MLA).
commir.kernel @bwd on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 2 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 4] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 4] f32 in sharding [R, R, S(0), R]
  commir.buffer @dO : [@b, @hk * @g, @i, 4] f32 in sharding [R, R, S(0), R]
  commir.buffer @LSE : [@b, @hk * @g, @i] f32 in sharding [R, R, S(0)]
  commir.buffer @dQ : [@b, @hk * @g, @i, 8] f32 out sharding [R, R, S(0), R]
  commir.buffer @dK : [@b, @hk, @j, 8] f32 out sharding [R, R, S(0), R]
  commir.buffer @dV : [@b, @hk, @j, 4] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o = commir.load @O[@b, @hk, @g, @i] : !commir.tile<f32>
  %do = commir.load @dO[@b, @hk, @g, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@b, @hk, @g, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@b, @hk, @g, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@b, @hk, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@b, @hk, @j] : !commir.tile<f32>
}
