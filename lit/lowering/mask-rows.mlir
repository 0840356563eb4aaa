// A causal mask whose key axis is split leaves query rows without a visible key (blocks wholly
// above the diagonal, or rows of a block that straddles it). The lowering skips such rows only
// where the body gives them no weight (the softmax pattern, lit/lowering/naive-causal-blocks.mlir),
// computes them as written where their values are numbers, and refuses otherwise. Before, it
// skipped every fully masked block: max(mask(s), s) then lost the scores above the diagonal
// (relative error 0.26-0.43, exit 0), and a store or a gemm patch of exp(mask(s)) had no value.
// Inputs/mask-rows.mlir holds the kernels.
//
// RUN: %mercury-run %S/Inputs/mask-rows.mlir --kernel keep --backend cpu --check --pass-pipeline='builtin.module(tile{axis=m factor=2 outer=m0 inner=m_t},parallelize{axis=m0 level=0},tile{axis=n factor=2 outer=n0 inner=n_t},shift{axis=n0 by=m0})' | FileCheck %s --check-prefix=KEEP
// RUN: %mercury-run %S/Inputs/mask-rows.mlir --kernel keep --backend cpu --check --pass-pipeline='builtin.module(tile{axis=n factor=2 outer=n0 inner=n_t})' | FileCheck %s --check-prefix=KEEP
// KEEP: check @Y: relative error {{.*}} ok
// RUN: %mercury-run %S/Inputs/mask-rows.mlir --kernel stored --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=i_t},parallelize{axis=i0 level=0},tile{axis=j factor=3 outer=j0 inner=j_t})' | FileCheck %s --check-prefix=STORED
// STORED: check @C: relative error {{.*}} ok
// RUN: %mercury-run %S/Inputs/mask-rows.mlir --kernel gemm --backend cpu --check --pass-pipeline='builtin.module(tile{axis=g factor=2 outer=g0 inner=g_t},parallelize{axis=g0 level=0},tile{axis=h factor=2 outer=h0 inner=h_t},shift{axis=h0 by=g0})' | FileCheck %s --check-prefix=GEMM
// GEMM: check @G: relative error {{.*}} ok
// RUN: %exit-status %mercury-opt %S/Inputs/mask-rows.mlir --kernel nan --pass-pipeline='builtin.module(tile{axis=x factor=2 outer=x0 inner=x_t},tile{axis=y factor=2 outer=y0 inner=y_t})' --emit=plan 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: mask-rows.mlir:49:8: error: a causal mask over query positions 0..16 and key positions 16..32 masks every key of the block; this body can neither leave such rows out nor compute them
// NAN: mask-rows.mlir:52:3: note: here 'commir.reduce add' into '@Z' gets NaN
// NAN: exit status 1
// An output that holds the reference's own -inf passes --check (it failed as "relative error
// inf, 120 non-finite values"); the -infs are counted.
// RUN: %mercury-run %S/Inputs/mask-rows.mlir --kernel scores --backend cpu --check --pass-pipeline='builtin.module(tile{axis=a factor=2 outer=a0 inner=a_t},parallelize{axis=a0 level=0},tile{axis=b factor=2 outer=b0 inner=b_t})' | FileCheck %s --check-prefix=SCORES
// SCORES: check @S: every rank holds its shard as declared
// SCORES: check @S: relative error 0.000e0 {{.*}}, 120 non-finite in both (as the reference)  ok
// SCORES: check @S in its dtypes: {{.*}}, 120 non-finite in both (as the reference), 0 of 256 elements rounded otherwise than the single-device plan  ok
// Found by a review of these rules the same day:
// - a mask of a value computed from a gemm patch's product was applied as if every block were
//   the first (positions 0, 0: relative error 0.68, exit 0): the product's positions are now
//   followed (the gemm's rows and columns), and a mask of anything whose positions are not is
//   refused;
// RUN: %mercury-run %S/Inputs/mask-of-gemm.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=j factor=2 outer=j0 inner=jt})' | FileCheck %s --check-prefix=OFGEMM
// OFGEMM: check @C: relative error {{.*}} ok
// - rows that hold zeros (a sum of exp(mask(s))) are right both left out and computed: a block
//   straddling the diagonal computes them (it was refused);
// RUN: %mercury-run %S/Inputs/mask-zero-sum.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=n factor=2 outer=n0 inner=nt})' | FileCheck %s --check-prefix=ZEROS
// ZEROS: check @Y: relative error {{.*}} ok
// - a softmax pair of unmasked scores shifted by the masked row maximum is +inf - (-inf) in a
//   fully masked row, inf / inf computed (+inf was counted a number: NaN, exit 0): refused, since
//   2026-12-06 already by the pair check (split, the shift must be the maximum of the scores it
//   shifts), before the mask rule sees it (its +inf class: lowering/conversion/src/mask.rs).
// RUN: %exit-status %mercury-opt %S/Inputs/mask-shifted-max.mlir --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=it},tile{axis=j factor=2 outer=j0 inner=jt})' --emit=plan 2>&1 | FileCheck %s --check-prefix=SHIFTED
// SHIFTED: mask-shifted-max.mlir:23:3: error: lse_merge merges blockwise softmax pairs {{.*}}: split over keys, the shift m in p = exp(t - m) must be the row maximum of those scores (m = row_reduce max t)
// SHIFTED: exit status 1
// Found by the new-user pass of 2026-12-03:
// - masked scores stored into a temp and loaded back escaped the rules (the store counted as a
//   sink that computes, the load as numbers): a fully masked block was computed, -inf - -inf,
//   NaN in 8 of 16 outputs with exit 0. A temp now carries what was stored to its loads of the
//   same tile, and a skipped store skips those loads: the same decisions as without the temp.
// RUN: %mercury-run %S/Inputs/mask-through-temp.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2},tile{axis=j factor=2})' | FileCheck %s --check-prefix=TEMP
// RUN: %mercury-run %S/Inputs/mask-through-temp.mlir --backend cpu --check --pass-pipeline='builtin.module(tile{axis=i factor=2 outer=i0 inner=it},parallelize{axis=i0 level=0},tile{axis=j factor=2 outer=j0 inner=jt},shift{axis=j0 by=i0})' | FileCheck %s --check-prefix=TEMP
// TEMP: check @O: relative error {{.*}} ok
// RUN: %exit-status %mercury-opt %S/Inputs/mask-through-temp.mlir --pass-pipeline='builtin.module(tile{axis=j factor=2})' --emit=plan 2>&1 | FileCheck %s --check-prefix=TEMPJ
// TEMPJ: error: a causal mask over query positions 0..8 and key positions 4..8 leaves rows 0..4 without a visible key; this body needs such rows left out, which a block with visible keys cannot do
// TEMPJ: exit status 1
