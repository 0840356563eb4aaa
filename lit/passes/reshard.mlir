// RUN: %mercury-opt --pass-pipeline='builtin.module(reshard{buffer=Q sharding=R,S(0),R,R}, commir-print-comm-plan)' %s | FileCheck %s
// RUN: not %mercury-opt --reshard="buffer=Q sharding=R,S(0),S(0),R" %s 2>&1 | FileCheck %s --check-prefix=BAD

commir.mesh @m shape [4]
commir.kernel @attn on @m {
  commir.axis @b = 1 spatial
  commir.axis @h = 8 spatial
  commir.axis @i = 16 spatial
  commir.axis @j = 16 managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 4] f32 in
  commir.buffer @V : [@b, @h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// Moving the mesh level from the sequence to the heads is an all-to-all; the whole Q is then
// gathered for the unscheduled attention.
// CHECK: //   @Q: all_gather
// CHECK: //   @Q: all_to_all
// CHECK: commir.reshard @Q to [R, S(0), R, R]
// CHECK-NEXT: %q = commir.load

// BAD: error: reshard: sharding of '@Q' uses mesh level 0 twice
