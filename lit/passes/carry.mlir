// The `carry` primitive: ring-flash-attn's backward, whose dK/dV accumulators travel with the
// key/value shards around the ring (examples/schedules/ring_flash_attn_bwd.sched), against
// shift-reduce (ring_attention_bwd.sched), and its refusals.
// RUN: %mercury-opt %repo/examples/small/attention_bwd.mlir --kernel attention_bwd --schedule %repo/examples/schedules/ring_flash_attn_bwd.sched | FileCheck %s
// RUN: %mercury-opt %repo/examples/small/attention_bwd.mlir --kernel attention_bwd --schedule %repo/examples/schedules/ring_flash_attn_bwd.sched --commir-print-comm-plan | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-run %repo/examples/small/attention_bwd.mlir --kernel attention_bwd_gqa --schedule %repo/examples/schedules/zigzag_ring_flash_attn_bwd.sched --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-opt --carry=buffer=C --split-input-file --verify-diagnostics %s

// CHECK: commir.reduce add %dq into @dQ[@b, @h, @i0, @i_t] : !commir.tile<f32>
// CHECK: commir.reduce add %dk into @dK[@b, @h, (@j0 + @i0 + 1) mod 8, @j_t] carry : !commir.tile<f32>
// CHECK: commir.reduce add %dv into @dV[@b, @h, (@j0 + @i0 + 1) mod 8, @j_t] carry : !commir.tile<f32>

// One neighbour transfer of each accumulator per step, and the adds in a stage of their own
// after each step (16 stages where shift-reduce has 11).
// PLAN: comm-plan @attention_bwd: mesh [8], 8 ranks, 16 stages
// PLAN: @dK: carried accumulator p2p (ring-flash-attn), 28 ops in 7 stages
// PLAN: @dV: carried accumulator p2p (ring-flash-attn), 28 ops in 7 stages

// EXEC-DAG: check @dQ: relative error {{.*}} ok
// EXEC-DAG: check @dK: relative error {{.*}} ok
// EXEC-DAG: check @dV: relative error {{.*}} ok

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), R]
  commir.buffer @C : [@j] f32 out sharding [S(0)]
  commir.for @i parallel(0) {
    commir.for @j {
      %a = commir.load @A[@i, @j] : !commir.tile<f32>
      // expected-error@+1 {{carry: this reduction into '@C' cannot carry: it is not shifted (shift its loop by a parallel loop first)}}
      commir.reduce add %a into @C[@j] : !commir.tile<f32>
    }
  }
}

// -----

commir.mesh @m shape [4]
commir.kernel @k on @m {
  commir.axis @i = 4 spatial
  commir.buffer @A : [@i] f32 in
  // expected-error@+1 {{carry: nothing is reduced into '@C'}}
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}

// -----

// Only a sum carries: the verifier refuses `carry` on a log-sum-exp merge.
commir.mesh @m shape [1]
commir.kernel @k on @m {
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @h, @i, 16] f32 in
  commir.buffer @K : [@b, @h, @j, 16] f32 in
  commir.buffer @V : [@b, @h, @j, 16] f32 in
  commir.buffer @C : [@b, @h, @i, 16] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  // expected-error@+1 {{reduce lse_merge: only a sum ('add') can carry its accumulator along a ring}}
  commir.reduce lse_merge %o, %lse into @C[@b, @h, @i] carry : !commir.tile<f32>, !commir.tile<f32>
}
