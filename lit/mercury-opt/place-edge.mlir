// place-edge: the placement of a buffer between two kernels of a module is a schedule decision;
// the pass re-declares it at its writer and its readers alike, so the edge moves nothing, and
// the writer delivers it there. What a reader's schedule then reads elsewhere, reshard-edges
// moves. A module's inputs and outputs (the caller's placements) are refused, as are a kernel
// already scheduled and a placement the buffer's extents do not take. mercury-run --module
// runs a schedule holding it and checks every kernel against the single-device module.
// RUN: %mercury-opt --place-edge="buffer=X sharding=R,S(0)" %s | FileCheck %s
// RUN: %if mercury-run %{ printf 'place-edge{buffer=X sharding=R,S(0)}\ntile{kernel=producer axis=d factor=4 outer=d0 inner=d_t}\nparallelize{kernel=producer axis=d0 level=0}\ntile{kernel=consumer axis=i factor=4 outer=i0 inner=i_t}\nparallelize{kernel=consumer axis=i0 level=0}\n' > %t.sched %}
// RUN: %if mercury-run %{ %mercury-run %s --module --schedule %t.sched --backend cpu --check | FileCheck %s --check-prefix=MOD %}
// RUN: not %mercury-opt --place-edge="buffer=A sharding=R,S(0)" %s 2>&1 | FileCheck %s --check-prefix=INPUT
// RUN: not %mercury-opt --place-edge="buffer=Y sharding=R,S(0)" %s 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not %mercury-opt --place-edge="buffer=Nope sharding=R,S(0)" %s 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not %mercury-opt --place-edge="buffer=X sharding=R,R,S(0)" %s 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not %mercury-opt --pass-pipeline="builtin.module(tile{kernel=consumer axis=i factor=4 outer=i0 inner=i_t},parallelize{kernel=consumer axis=i0 level=0},place-edge{buffer=X sharding=R,S(0)})" %s 2>&1 | FileCheck %s --check-prefix=SCHED

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

commir.kernel @consumer on @m {
  commir.axis @i = 16 spatial
  commir.axis @d = 8 spatial
  commir.buffer @X : [@i, @d] f32 in sharding [S(0), R]
  commir.buffer @Y : [@i, @d] f32 out sharding [S(0), R]
  %x = commir.load @X[@i, @d] : !commir.tile<f32>
  %y = commir.scale %x by 2.0 : !commir.tile<f32>
  commir.store %y into @Y[@i, @d] : !commir.tile<f32>
}

// CHECK-LABEL: commir.kernel @producer
// CHECK: commir.buffer @A : [@i, @d] f32 in sharding [S(0), R]
// CHECK: commir.buffer @X : [@i, @d] f32 out sharding [R, S(0)]
// CHECK-LABEL: commir.kernel @consumer
// CHECK: commir.buffer @X : [@i, @d] f32 in sharding [R, S(0)]
// CHECK: commir.buffer @Y : [@i, @d] f32 out sharding [S(0), R]

// The producer computes columns and leaves them so, and the consumer reads them so (the edge
// moves nothing); working on tokens, the consumer's plan gathers the columns it lacks.
// MOD-LABEL: kernel @consumer:
// MOD: edge @X: from @producer, placed alike ('sharding [R, S(0)]'): nothing moves
// MOD: // @X: all_gather
// MOD: check of @producer:
// MOD: check @X: every rank holds its shard as declared ('sharding [R, S(0)]')  ok
// MOD: check @X: relative error {{.*}}  ok
// MOD: check of @consumer:
// MOD: check @Y: every rank holds its shard as declared ('sharding [S(0), R]')  ok
// MOD: check @Y: relative error {{.*}}  ok

// INPUT: place-edge.mlir:{{[0-9]+}}:3: error: place-edge: '@A' is an input of the module (its first kernel reads it)
// OUTPUT: error: place-edge: '@Y' is an output of the module (no kernel reads it after '@consumer' writes it)
// NONE: error: place-edge: no kernel of the module declares '@Nope'
// RANK: error: place-edge: sharding of '@X' has 3 entries but the buffer has 2 dimensions
// SCHED: error: place-edge: the kernel '@consumer' is already scheduled; place the edge '@X' before the kernels' schedules
