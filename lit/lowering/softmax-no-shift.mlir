// The softmax without the max shift (p = exp(t), o = u / l, lse = log l) is a pair lse_merge
// takes, but its keys are not split: a key block whose exp(t) all underflow (a finite mask fill,
// padding, scores far below the row's maximum) has l = 0 and o = 0 / 0, which poisons the merge
// (a first version of 2026-12-06 split it: 96 of 128 outputs NaN under a finite causal mask,
// exit 0; sixteenth new-user pass). The split is refused with the way out: shift by the row
// maximum, or `--patch`, which takes this form as attention (the patch computes it shifted).
// REQUIRES: mercury-run
//
// Unsplit it runs; split over keys it is refused, located, with the advice.
// RUN: %mercury-run %S/Inputs/softmax-no-shift.mlir --backend cpu --check | FileCheck %s --check-prefix=OK
// OK: check @O: relative error {{.*}} ok
// RUN: not %mercury-opt %S/Inputs/softmax-no-shift.mlir --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=j_t},parallelize{axis=j0 level=0})' 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: softmax-no-shift.mlir:21:8: error: commir.binary: 'div' by a partial sum (split by loop '@j0') is not a partial result: reduce it first (a softmax without the max shift cannot be split over its keys: a key block whose exp(t) all underflow gives 0 / 0; subtract the row maximum, m = row_reduce max t, p = exp(t - m), lse = m + log l, or make it the attention patch with --patch)
// shift-shard leaves such keys whole and distributes the queries alone.
// RUN: %mercury-run %S/Inputs/softmax-no-shift-2d.mlir --backend cpu --check --shift-shard | FileCheck %s --check-prefix=OK
//
// `--patch` takes the unshifted softmax as attention, which then rings.
// RUN: %mercury-opt --patch %S/Inputs/softmax-no-shift.mlir | FileCheck %s --check-prefix=PATCH
// PATCH: commir.patch "attention" (%q, %k, %v) {causal = false, scale = 0.35}
// PATCH-NOT: commir.unary
// PATCH: commir.reduce lse_merge
// RUN: %mercury-run %S/Inputs/softmax-no-shift.mlir --backend cpu --check --pass-pipeline='builtin.module(patch,shift-shard)' | FileCheck %s --check-prefix=OK
//
// On [s, d] tiles the attention patch does not apply, and `--patch` makes no gemm of
// attention's matmul p, v alone (the pair o = u / l lost its u, and the pair check blamed the
// user's body: "the dividend of o is not u = matmul p, v"); the body stays tile ops and runs.
// RUN: %mercury-opt --patch %S/Inputs/softmax-no-shift-2d.mlir | FileCheck %s --check-prefix=NOGEMM
// RUN: %mercury-opt --patch %S/naive-causal-blocks.mlir | FileCheck %s --check-prefix=NOGEMM
// NOGEMM-NOT: "gemm"
// NOGEMM: commir.matmul %p, %v
// NOGEMM-NOT: "gemm"
// RUN: %mercury-run %S/Inputs/softmax-no-shift-2d.mlir --backend cpu --check --pass-pipeline='builtin.module(patch,shift-shard)' | FileCheck %s --check-prefix=OK
// An exponential that no row sum takes is no softmax: exp(X) W stays a gemm (fifteenth pass:
// the first version of the rule refused it as "a softmax's probabilities").
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' %S/../passes/Inputs/patch-exp-gemm.mlir | FileCheck %s --check-prefix=EXPGEMM
// EXPGEMM: %e = commir.unary exp %x
// EXPGEMM: commir.patch "gemm" (%e, %w)
