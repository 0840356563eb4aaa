// A reference that computes NaN says nothing a check can hold a schedule to: NaN in both
// passed as "non-finite in both (as the reference)" until 2026-12-03, and a body lowered wrongly
// on both sides (a tiled input that is its own reference, new-user pass) passed with it. The
// check now fails and says the reference holds NaN; equal infinities still match
// (lit/lowering/mask-rows.mlir, SCORES).
// RUN: %exit-status %mercury-run %s --backend cpu --check --shift-shard 2>&1 | FileCheck %s
// CHECK: check @C: relative error inf {{.*}}; the reference itself holds {{[0-9]+}} NaN (the operator as written computes NaN there: not a value to check against){{.*}}FAILED
// CHECK: exit status 1
// A tiled input (sequential loops only) is the operator as given; the note says the reference
// shares its loops and blocks.
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=2})' %S/../../examples/small/attention.mlir > %t.tiled.mlir
// RUN: %mercury-run %t.tiled.mlir --backend cpu --check 2>&1 | FileCheck %s --check-prefix=LOOPS
// LOOPS: mercury-run: note: the input has loops: the reference is this IR on one device with the same loops and blocks
// LOOPS: check @O: relative error {{.*}} ok
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 8 spatial
  commir.axis @d = 4 spatial
  commir.buffer @A : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @C : [@i, @d] f32 out sharding [S(0), R]
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %l = commir.unary log %a : !commir.tile<f32>
  commir.store %l into @C[@i, @d] : !commir.tile<f32>
}
