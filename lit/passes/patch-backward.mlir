// `patch` recognises the naive attention backward (FlashAttention-2's, with tile ops) as the
// attention_bwd patch: `--patch` turns examples/attention_bwd_naive.mlir into exactly the
// plan of the hand-patched kernel of examples/attention_bwd.mlir, unscheduled and through
// --shift-shard (the zigzag ring backward); refusals are located where the body stops being
// the backward.
// RUN: %mercury-opt --patch --emit=plan %repo/examples/attention_bwd_naive.mlir -o %t.naive.json
// RUN: %mercury-opt --kernel attention_bwd --emit=plan %repo/examples/attention_bwd.mlir -o %t.hand.json
// RUN: diff %t.naive.json %t.hand.json
// RUN: %mercury-opt --patch --shift-shard --emit=plan %repo/examples/attention_bwd_naive.mlir -o %t.naive-ring.json
// RUN: %mercury-opt --kernel attention_bwd --shift-shard --emit=plan %repo/examples/attention_bwd.mlir -o %t.hand-ring.json
// RUN: diff %t.naive-ring.json %t.hand-ring.json
// RUN: %mercury-opt --patch %s | FileCheck %s
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(patch{kernel=attention_bwd})' %S/Inputs/patch-backward-invalid.mlir

// Without a scale (written out: not the default 1/sqrt(8)), not causal, the product do * o
// written o * do, and the ops in another order.
// CHECK-LABEL: commir.kernel @bwd
// CHECK: %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %lse) {causal = false, scale = 1.0}
// CHECK-NOT: commir.matmul
// CHECK: commir.reduce add %dq into @dQ
commir.mesh @mesh shape [2]
commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@h, @i, 8] f32 in
  commir.buffer @K : [@h, @j, 8] f32 in
  commir.buffer @V : [@h, @j, 8] f32 in
  commir.buffer @O : [@h, @i, 8] f32 in
  commir.buffer @dO : [@h, @i, 8] f32 in
  commir.buffer @LSE : [@h, @i] f32 in
  commir.buffer @dQ : [@h, @i, 8] f32 out
  commir.buffer @dK : [@h, @j, 8] f32 out
  commir.buffer @dV : [@h, @j, 8] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %lse = commir.load @LSE[@h, @i] : !commir.tile<f32>
  %od = commir.binary mul %o, %do : !commir.tile<f32>
  %dd = commir.row_reduce sum %od : !commir.tile<f32>
  %dp = commir.matmul %do, %v transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %z = commir.binary sub %s, %lse : !commir.tile<f32>
  %p = commir.unary exp %z : !commir.tile<f32>
  %dpd = commir.binary sub %dp, %dd : !commir.tile<f32>
  %ds = commir.binary mul %dpd, %p : !commir.tile<f32>
  %dk = commir.matmul %ds, %q transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dq = commir.matmul %ds, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %dv = commir.matmul %p, %do transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}
