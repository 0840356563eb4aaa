// Mistakes in a schedule file (--schedule) are located in it: file:line:col, the line and a
// caret; unknown passes and options get a "did you mean"; an unclosed '{' is reported on its
// own line; a pass that fails names its schedule line in a note. mercury-run reads schedules
// the same way.
// RUN: rm -rf %t && split-file %s %t
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/typo.sched 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: typo.sched:3:16: error: pass 'tile' has no option 'factr'; did you mean 'factor'? (options: axis, factor, outer, inner, kernel)
// TYPO-NEXT: tile{axis=j    factr=4}
// TYPO-NEXT: {{^               \^$}}
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/pass.sched 2>&1 | FileCheck %s --check-prefix=PASS
// PASS: pass.sched:2:3: error: 'paralelize' does not refer to a registered pass; did you mean 'parallelize'? (see --list-passes)
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/unclosed.sched 2>&1 | FileCheck %s --check-prefix=UNCLOSED
// UNCLOSED: unclosed.sched:2:5: error: missing '}' to close the options of 'tile'
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/value.sched 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: value.sched:1:13: error: pass 'tile': option 'factor' must be a non-negative integer, got 'four'
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/missing.sched 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: missing.sched:1:1: error: pass 'tile' requires option 'factor' (iterations of the outer axis)
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/level.sched 2>&1 | FileCheck %s --check-prefix=LEVEL
// LEVEL: op.mlir:3:3: error: parallelize: mesh level 2 does not exist: mesh '@m' has 2 levels (0 to 1)
// LEVEL: level.sched:2:1: note: in pass 'parallelize{axis=i0 level=2 shard=true}'
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/badname.sched 2>&1 | FileCheck %s --check-prefix=BADNAME
// BADNAME: op.mlir:3:3: error: parallelize: mesh '@m' has no level named 'gpus'; did you mean 'gpu'? (its levels are node, gpu)
// RUN: %mercury-opt %t/op.mlir --schedule=%t/byname.sched | FileCheck %s --check-prefix=BYNAME
// BYNAME: commir.for @i0 parallel(1) {

//--- op.mlir
commir.mesh @m shape [2, 4] names ["node", "gpu"]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 16 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
//--- typo.sched
# a comment line
tile{axis=i factor=4 outer=i0 inner=i_t}
tile{axis=j    factr=4}
//--- pass.sched
tile{axis=i factor=4 outer=i0 inner=i_t}
  paralelize{axis=i0 level=1}
//--- unclosed.sched
tile{axis=i factor=4 outer=i0 inner=i_t}
tile{axis=j factor=4
parallelize{axis=i0 level=1}
//--- value.sched
tile{axis=i factor=four}
//--- missing.sched
tile{axis=i}
//--- level.sched
tile{axis=i factor=4 outer=i0 inner=i_t}
parallelize{axis=i0 level=2}
//--- badname.sched
tile{axis=i factor=4 outer=i0 inner=i_t}
parallelize{axis=i0 level=gpus}
//--- byname.sched
tile{axis=i factor=4 outer=i0 inner=i_t}   # the loop over the 4 GPUs of a node
parallelize{axis=i0 level=gpu}
