// REQUIRES: mercury-run
// RUN: %mercury-opt --join="outer=b inner=h" %s | FileCheck %s
// RUN: %mercury-opt --join="outer=b inner=h" --split-input-file --verify-diagnostics %S/Inputs/join-invalid.mlir
// RUN: %mercury-opt --pass-pipeline='builtin.module(join{outer=b inner=h}, tile{axis=b_h factor=8 outer=p inner=pt}, parallelize{axis=p level=0})' %S/Inputs/join-pairs.mlir | FileCheck %s --check-prefix=PAIRS
// RUN: %mercury-run %S/Inputs/join-pairs.mlir --pass-pipeline='builtin.module(join{outer=b inner=h}, tile{axis=b_h factor=8 outer=p inner=pt}, parallelize{axis=p level=0})' --backend cpu --check --seed 2 | FileCheck %s --check-prefix=PAIRSCHK

commir.mesh @m shape [8]
commir.kernel @attn on @m {
  commir.axis @b = 2 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in
  commir.buffer @K : [@b, @h, @j, 4] f32 in
  commir.buffer @V : [@b, @h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// CHECK:     commir.axis @b_h = 16 spatial
// CHECK-NOT: commir.axis @h
// CHECK:     commir.buffer @Q : [@b_h, @i, 4] f32 in
// CHECK:     %q = commir.load @Q[@b_h, @i] : !commir.tile<f32>

// Joined axes keep the smallest block of the inner one (here none): 2 batches x 4 heads go
// one (batch, head) pair per rank over 8 ranks.
// PAIRS: commir.axis @p = 8 spatial
// PAIRS-NEXT: commir.axis @pt = 1 spatial{{$}}
// PAIRS: commir.for @p parallel(0) {
// PAIRSCHK: check @O: every rank holds its shard as declared
// PAIRSCHK: check @O: relative error {{.*}} ok
