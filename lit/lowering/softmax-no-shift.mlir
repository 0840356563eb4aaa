// The softmax without the max shift (p = exp(t), lse = log l), which docs/dialect.md lists as a
// blockwise pair lse_merge merges, was refused as soon as the key axis was split ("'div' by a
// partial sum ... is not a partial result"; fourteenth new-user pass): the quotient of two
// partial sums over the same loops and the log of a partial sum are block-local now
// (dialects/commir/src/ops/compute.rs), and only lse_merge's pair check lets them out.
// REQUIRES: mercury-run
//
// Keys split over the ranks (tree attention): merged blocks agree with the unsplit body.
// RUN: %mercury-run %S/Inputs/softmax-no-shift.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=j_t},parallelize{axis=j0 level=0})' | FileCheck %s --check-prefix=TREE
// TREE: check @O: relative error {{[0-9.]+}}e-{{1[0-9]}} {{.*}} ok
// The ring (K/V shifted around the ranks) and its causal form, both sequence axes tiled.
// RUN: %mercury-run %S/Inputs/softmax-no-shift.mlir --backend cpu --check --shift-shard | FileCheck %s --check-prefix=TREE
// RUN: %mercury-run %S/Inputs/softmax-no-shift-2d.mlir --backend cpu --check --shift-shard | FileCheck %s --check-prefix=TREE
//
// A causal block that masks every key of some rows gives o = 0 / 0: refused, located, as the
// shifted form is.
// RUN: not %mercury-opt %S/Inputs/softmax-no-shift-2d.mlir --pass-pipeline='builtin.module(tile{axis=j factor=2})' --emit=plan 2>&1 | FileCheck %s --check-prefix=MASKED
// MASKED: softmax-no-shift-2d.mlir:15:9: error: a causal mask over query positions 0..8 and key positions 4..8 leaves rows 0..4 without a visible key
// MASKED: note: here 'commir.reduce lse_merge' into '@O' gets o = NaN and lse = -inf
//
// The block-local quotient may leave only through lse_merge: a store of it is refused.
// RUN: sed -e 's/commir.reduce lse_merge %o, %lse into @O\[@b, @h, @i\] : !commir.tile<f32>, !commir.tile<f32>/commir.store %o into @O[@b, @h, @i] : !commir.tile<f32>/' %S/Inputs/softmax-no-shift.mlir > %t.store.mlir
// RUN: not %mercury-opt %t.store.mlir --pass-pipeline='builtin.module(tile{axis=j factor=4})' 2>&1 | FileCheck %s --check-prefix=STORE
// STORE: error: store: the value is block-local (a max, a softmax, or a quotient or log of partial sums over an axis split by loop '@j_o')
//
// `--patch` takes the unshifted softmax as attention (the patch computes it shifted, exactly).
// RUN: %mercury-opt --patch %S/Inputs/softmax-no-shift.mlir | FileCheck %s --check-prefix=PATCH
// PATCH: commir.patch "attention" (%q, %k, %v) {causal = false, scale = 0.35}
// PATCH-NOT: commir.unary
// PATCH: commir.reduce lse_merge
// RUN: %mercury-run %S/Inputs/softmax-no-shift.mlir --backend cpu --check --pass-pipeline='builtin.module(patch,shift-shard)' | FileCheck %s --check-prefix=TREE
//
// On [s, d] tiles the attention patch does not apply, and `--patch` no longer makes a gemm of
// attention's matmul p, v alone (the pair o = u / l lost its u: "the dividend of o is not
// u = matmul p, v"); the body stays tile ops and still runs.
// RUN: %mercury-opt --patch %S/Inputs/softmax-no-shift-2d.mlir | FileCheck %s --check-prefix=NOGEMM
// RUN: %mercury-opt --patch %S/naive-causal-blocks.mlir | FileCheck %s --check-prefix=NOGEMM
// NOGEMM-NOT: "gemm"
// NOGEMM: commir.matmul %p, %v
// NOGEMM-NOT: "gemm"
// RUN: %mercury-run %S/Inputs/softmax-no-shift-2d.mlir --backend cpu --check --pass-pipeline='builtin.module(patch,shift-shard)' | FileCheck %s --check-prefix=TREE
// An exponential that no row sum takes is no softmax: exp(X) W stays a gemm (fifteenth pass:
// the first version of the rule refused it as "a softmax's probabilities").
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' %S/../passes/Inputs/patch-exp-gemm.mlir | FileCheck %s --check-prefix=EXPGEMM
// EXPGEMM: %e = commir.unary exp %x
// EXPGEMM: commir.patch "gemm" (%e, %w)
