// `patch` replaces the naive attention body by the attention patch and plain matmuls by the
// gemm patch; `--patch` turns examples/attention_naive.mlir into exactly the plan of the
// hand-patched examples/attention.mlir; refusals are located at the op where the body stops
// matching what the named kernel computes.
// RUN: %mercury-opt --patch --emit=plan %repo/examples/attention_naive.mlir -o %t.naive.json
// RUN: %mercury-opt --emit=plan %repo/examples/attention.mlir -o %t.hand.json
// RUN: diff %t.naive.json %t.hand.json
// RUN: %mercury-opt --patch --shift-shard --emit=plan %repo/examples/attention_naive.mlir -o %t.naive-ring.json
// RUN: %mercury-opt --shift-shard --emit=plan %repo/examples/attention.mlir -o %t.hand-ring.json
// RUN: diff %t.naive-ring.json %t.hand-ring.json
// RUN: %mercury-opt --split-input-file --patch %s | FileCheck %s
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(patch{kernel=attention})' %S/Inputs/patch-invalid.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(patch{kernel=gemm})' %S/Inputs/patch-gemm.mlir | FileCheck %S/Inputs/patch-gemm.mlir --check-prefix=GEMM
// RUN: not %mercury-opt --pass-pipeline='builtin.module(patch{kernel=conv})' %s 2>&1 | FileCheck %s --check-prefix=BADKERNEL

// BADKERNEL: patch: unknown kernel 'conv' (known: attention, attention_bwd, gemm)

// Causal grouped-query attention with an explicit scale (the mask before the scale), the
// log-sum-exp written m + log l the other way round.
commir.mesh @mesh shape [4]
commir.kernel @gqa on @mesh {
  commir.axis @hk = 2 spatial
  commir.axis @g = 2 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@hk * @g, @i, 8] f32 in
  commir.buffer @K : [@hk, @j, 8] f32 in
  commir.buffer @V : [@hk, @j, 8] f32 in
  commir.buffer @O : [@hk * @g, @i, 8] f32 out
  commir.for @j {
    %q = commir.load @Q[@hk, @g, @i] : !commir.tile<f32>
    %k = commir.load @K[@hk, @j] : !commir.tile<f32>
    %v = commir.load @V[@hk, @j] : !commir.tile<f32>
    %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    %sm = commir.mask causal %s : !commir.tile<f32>
    %t = commir.scale %sm by 0.5 : !commir.tile<f32>
    %m = commir.row_reduce max %t : !commir.tile<f32>
    %d = commir.binary sub %t, %m : !commir.tile<f32>
    %p = commir.unary exp %d : !commir.tile<f32>
    %l = commir.row_reduce sum %p : !commir.tile<f32>
    %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    %o = commir.binary div %u, %l : !commir.tile<f32>
    %ll = commir.unary log %l : !commir.tile<f32>
    %lse = commir.binary add %ll, %m : !commir.tile<f32>
    commir.reduce lse_merge %o, %lse into @O[@hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
  }
}

// CHECK-LABEL: commir.kernel @gqa
// CHECK:       commir.for @j {
// CHECK-NEXT:    %q = commir.load
// CHECK-NEXT:    %k = commir.load
// CHECK-NEXT:    %v = commir.load
// CHECK-NEXT:    %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, scale = 0.5}
// CHECK-NEXT:    commir.reduce lse_merge %o, %lse into @O

// -----

// Non-causal attention whose output is stored whole (no log-sum-exp, unscaled), next to a
// gemm: the attention's lse is a fresh result nobody reads.
commir.mesh @mesh shape [2]
commir.kernel @both on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 reduction
  commir.axis @n = 4 spatial
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @W : [4, @n] f32 in
  commir.buffer @O : [@h, @i, @n] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %w = commir.load @W[@n] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %y = commir.matmul %o, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.store %y into @O[@h, @i, @n] : !commir.tile<f32>
}

// CHECK-LABEL: commir.kernel @both
// CHECK:      %o, %[[LSE:.*]] = commir.patch "attention" (%q, %k, %v) {causal = false, scale = 1.0}
// CHECK-NEXT: %y = commir.patch "gemm" (%o, %w)
// CHECK-NOT:  %[[LSE]]
