// commir.reduce lse_merge merges blockwise softmax pairs: its values must be (u / l, m + log l)
// with p = exp(t - m), l = row_reduce sum p, u = matmul p, v (or p = exp(t) and lse = log l),
// else a split over the key positions (a ring, a tile of @j) would merge the blocks into
// something else. A new-user pass found `lse = m + l` and `o = u * l` accepted, a tile of
// @j then computing another result (relative error 0.31 and 0.67), `--emit=plan` exit 0.
// REQUIRES: mercury-run
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s | FileCheck %s
// The scores must be the same in every block: t = s / m (m the row maximum) passed the check,
// and a tile of @j computed another result (relative error 0.10, exit 0 without --check).
// RUN: %mercury-opt %S/Inputs/lse-merge-block-scores.mlir -o /dev/null
// RUN: not %mercury-opt %S/Inputs/lse-merge-block-scores.mlir --pass-pipeline='builtin.module(tile{axis=j factor=2})' 2>&1 | FileCheck %s --check-prefix=BLOCKSCORES
// BLOCKSCORES: lse-merge-block-scores.mlir:22:3: error: lse_merge merges blockwise softmax pairs {{.*}}: the scores t in p = exp(t) are themselves block-local (over loop '@j_o'): only scores and values that are the same in every block merge exactly
// The values must be the same in every block too, and o and lse block-local over the same
// loops (a fifteenth new-user pass: both accepted, relative error 0.23 and 0.3, exit 0).
// RUN: %mercury-opt %S/Inputs/lse-merge-block-values.mlir -o /dev/null
// RUN: not %mercury-opt %S/Inputs/lse-merge-block-values.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2})' 2>&1 | FileCheck %s --check-prefix=BLOCKVALUES
// BLOCKVALUES: lse-merge-block-values.mlir:31:3: error: lse_merge merges blockwise softmax pairs {{.*}}: the values v in u = matmul p, v are block-local (over loop '@k_o')
// RUN: %mercury-opt %S/Inputs/lse-merge-pair-loops.mlir -o /dev/null
// RUN: not %mercury-opt %S/Inputs/lse-merge-pair-loops.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2},parallelize{axis=k_o level=0})' 2>&1 | FileCheck %s --check-prefix=PAIRLOOPS
// PAIRLOOPS: lse-merge-pair-loops.mlir:28:3: error: reduce lse_merge: the output is block-local over loops [@k_o] but its log-sum-exp over []; a pair is one block's, both over the same loops
// Split over keys, the shift must be the row maximum of the scores it shifts (sixteenth pass:
// the unmasked maximum of finitely masked scores gave 0 / 0 in a fully masked block).
// RUN: %mercury-opt %S/Inputs/lse-merge-shift-not-max.mlir -o /dev/null
// RUN: not %mercury-opt %S/Inputs/lse-merge-shift-not-max.mlir --pass-pipeline='builtin.module(tile{axis=j factor=4})' 2>&1 | FileCheck %s --check-prefix=SHIFTMAX
// SHIFTMAX: lse-merge-shift-not-max.mlir:30:3: error: lse_merge merges blockwise softmax pairs {{.*}}: split over keys, the shift m in p = exp(t - m) must be the row maximum of those scores (m = row_reduce max t)
// A pair of patch results is one patch's (o, lse); a cast of its o merges too.
// RUN: not %mercury-opt %S/Inputs/lse-merge-two-patches.mlir 2>&1 | FileCheck %s --check-prefix=TWOPATCHES
// TWOPATCHES: lse-merge-two-patches.mlir:19:3: error: lse_merge merges blockwise softmax pairs {{.*}}: o and lse are not the output and the log-sum-exp of one attention patch (results 0 and 1 of the same commir.patch)
// RUN: %mercury-run %S/Inputs/lse-merge-patch-cast.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=j factor=2})' | FileCheck %s --check-prefix=PATCHCAST
// PATCHCAST: check @O: relative error {{.*}} ok
// CHECK: commir.kernel @right
// CHECK: commir.kernel @unshifted

commir.mesh @m shape [2]
commir.kernel @right on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] bf16 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<bf16>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.scale %s by 0.5 : !commir.tile<f32>
  %m = commir.row_reduce max %t : !commir.tile<f32>
  %d = commir.binary sub %t, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %pb = commir.cast %p : !commir.tile<f32> to !commir.tile<bf16>
  %u = commir.matmul %pb, %v : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %ll, %m : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// No shift: p = exp(s), lse = log l.
commir.mesh @m shape [2]
commir.kernel @unshifted on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %p = commir.unary exp %s : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %lse = commir.unary log %l : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// lse = m + l (log missing).
commir.mesh @m shape [2]
commir.kernel @no_log on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %lse = commir.binary add %m, %l : !commir.tile<f32>
  // expected-error@+1 {{lse is not m + log l with the m of p = exp(t - m) and the l that divides o}}
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// o = u * l.
commir.mesh @m shape [2]
commir.kernel @times on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary mul %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  // expected-error@+1 {{o is not a quotient u / l}}
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}

// -----

// The m added to lse is not the one p subtracts.
commir.mesh @m shape [2]
commir.kernel @other_m on @m {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 4] f32 in
  commir.buffer @K : [@j, 4] f32 in
  commir.buffer @V : [@j, 4] f32 in
  commir.buffer @O : [@i, 4] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %m2 = commir.scale %m by 2.0 : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m2, %ll : !commir.tile<f32>
  // expected-error@+1 {{lse is not m + log l with the m of p = exp(t - m)}}
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
