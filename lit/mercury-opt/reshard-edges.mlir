// reshard-edges: an input of a kernel that an earlier kernel of the module writes arrives where
// that kernel leaves it; where the reader declares another placement, the input is re-declared
// in the writer's and resharded at the reader's start, lowered as any reshard (an all-to-all,
// an all-gather, a local slice, a permutation). Placements that agree move nothing; running
// the pass again changes nothing; mercury-run --module runs the module so and checks every
// kernel against the single-device module.
// RUN: %mercury-opt --reshard-edges %s | FileCheck %s
// RUN: %mercury-opt --reshard-edges %s | %mercury-opt --reshard-edges | FileCheck %s
// RUN: %mercury-opt --reshard-edges --commir-print-comm-plan %s | FileCheck %s --check-prefix=PLAN
// RUN: %if mercury-run %{ %mercury-run %s --module --backend cpu --check | FileCheck %s --check-prefix=MOD %}
// RUN: not %mercury-opt --reshard-edges %S/Inputs/reshard-edges-invalid.mlir 2>&1 | FileCheck %s --check-prefix=BAD

commir.mesh @m shape [4]

commir.kernel @producer on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @A : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @X : [@i, @d] f32 out sharding [S(0), R]
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %e = commir.unary exp %a : !commir.tile<f32>
  commir.store %e into @X[@i, @d] : !commir.tile<f32>
}

// Tokens to columns: an all-to-all.
commir.kernel @columns on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @X : [@i, @d] f32 in sharding [R, S(0)]
  commir.buffer @Y1 : [@i, @d] f32 out sharding [R, S(0)]
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  %y = commir.scale %x by 2.0 : !commir.tile<f32>
  commir.store %y into @Y1[@i, @d] : !commir.tile<f32>
}

// Whole on every rank: an all-gather.
commir.kernel @whole on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @X : [@i, @d] f32 in
  commir.buffer @Y2 : [@i, @d] f32 out
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  %y = commir.unary silu %x : !commir.tile<f32>
  commir.store %y into @Y2[@i, @d] : !commir.tile<f32>
}

// Head-tail (zigzag) tokens: a permutation of the runs that change rank.
commir.kernel @zigzag on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @X : [@i, @d] f32 in sharding [S(zigzag(0)), R]
  commir.buffer @Y3 : [@i, @d] f32 out sharding [S(zigzag(0)), R]
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  %y = commir.add_scalar %x, 1.0 : !commir.tile<f32>
  commir.store %y into @Y3[@i, @d] : !commir.tile<f32>
}

// Placed alike: nothing moves; @A is the module's input, not an edge.
commir.kernel @alike on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @A : [@i, @d] f32 in sharding [R, S(0)]
  commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @Y4 : [@i, @d] f32 out sharding [S(0), R]
  %a = commir.load @A[@i, @d] : !commir.tile<f32>
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  %y = commir.binary mul %a, %x : !commir.tile<f32>
  commir.store %y into @Y4[@i, @d] : !commir.tile<f32>
}

// CHECK-LABEL: commir.kernel @columns on @m {
// CHECK: commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
// CHECK-NEXT: commir.buffer @Y1 : [@i, @d] f32 out sharding [R, S(0)]
// CHECK-NEXT: commir.reshard @X to [R, S(0)]
// CHECK-LABEL: commir.kernel @whole on @m {
// CHECK: commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
// CHECK: commir.reshard @X to [R, R]
// CHECK-LABEL: commir.kernel @zigzag on @m {
// CHECK: commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
// CHECK: commir.reshard @X to [S(zigzag(0)), R]
// CHECK-LABEL: commir.kernel @alike on @m {
// CHECK: commir.buffer @A : [@i, @d] f32 in sharding [R, S(0)]
// CHECK-NEXT: commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
// CHECK-NOT: commir.reshard
// CHECK: }

// The kernels are unscheduled (every rank computes the whole: the all-gathers after the
// edges); the edges are the all-to-all, the all-gather of @whole and the permutation.
// PLAN: // comm-plan @columns
// PLAN: //   @X: all_to_all, 4 ops in 1 stages, 384 B sent in total
// PLAN: // comm-plan @whole
// PLAN-NEXT: //   @X: all_gather, 4 ops in 1 stages, 1.5 KiB sent in total
// PLAN-NEXT: // comm-plan @zigzag
// PLAN: //   @X: permute p2p (reshard), 6 ops in 1 stages, 384 B sent in total, levels [0]
// PLAN: //   @X: placed [S(zigzag(0)), R], declared [S(0), R] (moved at the start)
// PLAN: // comm-plan @alike
// PLAN-NEXT: //   @A: all_gather, 4 ops in 1 stages
// PLAN-NEXT: //   @X: all_gather, 4 ops in 1 stages
// PLAN-NEXT: module {

// MOD: kernel @columns:
// MOD-NEXT: edge @X: from @producer in 'sharding [S(0), R]', read in 'sharding [R, S(0)]': resharded at the start of @columns
// MOD: kernel @alike:
// MOD-NEXT: edge @X: from @producer, placed alike ('sharding [S(0), R]'): nothing moves
// MOD: check @Y1: relative error {{.*}} ok
// MOD: check @Y2: relative error {{.*}} ok
// MOD: check @Y3: relative error {{.*}} ok
// MOD: check @Y4: relative error {{.*}} ok

// BAD: reshard-edges-invalid.mlir:{{[0-9]+}}:3: error: reshard-edges: '@X' is [16, 4] f32 here and [16, 8] f32 where the kernel '@producer' writes it
// BAD: note: '@X' as the kernel '@producer' writes it
