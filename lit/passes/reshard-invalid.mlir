// reshard's sharding option: a bad striped block is called a block (not a mesh level), a bad
// level a level, and the error points at the option in the pipeline or the schedule line.
// RUN: rm -rf %t && split-file %s %t
// RUN: not %mercury-opt %t/op.mlir --pass-pipeline='builtin.module(reshard{buffer=A sharding=S(striped(0;-1)),R})' 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: <pass-pipeline>:1:33: error: pass 'reshard': option 'sharding': the striped block '-1' of 'striped(0;-1)' must be a positive integer (striped(L;B): mesh level L, blocks of B positions)
// BLOCK-NEXT: builtin.module(reshard{buffer=A sharding=S(striped(0;-1)),R})
// BLOCK-NEXT: {{^                                \^$}}
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/block.sched 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: block.sched:2:18: error: pass 'reshard': option 'sharding': the striped block '0' of 'striped(0;0)' must be a positive integer
// SCHED-NEXT: reshard{buffer=A sharding=S(striped(0;0)),R}
// SCHED-NEXT: {{^                 \^$}}
// RUN: not %mercury-opt %t/op.mlir --pass-pipeline='builtin.module(reshard{buffer=A sharding=S(striped(-1;4)),R})' 2>&1 | FileCheck %s --check-prefix=LEVEL
// LEVEL: <pass-pipeline>:1:33: error: pass 'reshard': option 'sharding': '-1' in 'S(striped(-1;4))' is not a mesh level (a level is a mesh dimension's number, from 0)
// RUN: not %mercury-opt %t/op.mlir --reshard='buffer=A sharding=S(zigzag(x)),R' 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: mercury-opt: error: pass 'reshard': option 'sharding': 'x' in 'S(zigzag(x))' is not a mesh level (a level is a mesh dimension's number, from 0)

//--- op.mlir
commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @m = 16 spatial
  commir.axis @n = 4 spatial
  commir.buffer @A : [@m, @n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  %a = commir.load @A[@m, @n] : !commir.tile<f32>
  commir.store %a into @C[@m, @n] : !commir.tile<f32>
}
//--- block.sched
# a placement a rank at a time
reshard{buffer=A sharding=S(striped(0;0)),R}
