// An option given twice is an error, not "the last one wins": in a schedule file, in a
// pipeline and in a --<pass>= flag. The schedule and pipeline forms point at the repetition and
// name the first in a note.
// RUN: rm -rf %t && split-file %s %t
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/twice.sched 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: twice.sched:1:22: error: pass 'tile': option 'factor' given twice ('factor=4', then 'factor=2'); give each option once
// SCHED-NEXT: tile{axis=m factor=4 factor=2 outer=m0 inner=mt}
// SCHED-NEXT: {{^                     \^$}}
// SCHED-NEXT: twice.sched:1:13: note: 'factor' is first given here
// RUN: not %mercury-opt %t/op.mlir --pass-pipeline='builtin.module(tile{axis=m factor=2 axis=n})' 2>&1 | FileCheck %s --check-prefix=PIPELINE
// PIPELINE: <pass-pipeline>:1:37: error: pass 'tile': option 'axis' given twice ('axis=m', then 'axis=n'); give each option once
// PIPELINE: <pass-pipeline>:1:21: note: 'axis' is first given here
// RUN: not %mercury-opt %t/op.mlir --tile="axis=m axis=n factor=2" 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: mercury-opt: error: pass 'tile': option 'axis' given twice ('axis=m', then 'axis=n'); give each option once
// A bare flag option counts too.
// RUN: not %mercury-opt %t/op.mlir --pass-pipeline='builtin.module(parallelize{axis=m level=0 shard shard=false})' 2>&1 | FileCheck %s --check-prefix=BARE
// BARE: error: pass 'parallelize': option 'shard' given twice ('shard=true', then 'shard=false'); give each option once

//--- op.mlir
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 12 spatial
  commir.axis @n = 6 spatial
  commir.buffer @A : [@m, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  %a = commir.load @A[@m, @n] : !commir.tile<f32>
  commir.store %a into @C[@m, @n] : !commir.tile<f32>
}
//--- twice.sched
tile{axis=m factor=4 factor=2 outer=m0 inner=mt}
