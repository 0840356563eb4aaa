// shift-shard refuses an output axis whose blocks over the mesh would be smaller than its
// declared minimum, and says so: 512 tokens over 8 ranks divide (blocks of 64), below `min 128`.
// It said "no spatial axis of the output divides over the 8 devices" (a new-user run).
// RUN: %exit-status %mercury-opt --shift-shard %s 2>&1 | FileCheck %s
// CHECK: shift-shard-min-block.mlir:15:1: error: shift-shard: no spatial axis of the output can be distributed over the 8 devices of '@mesh': '@i' = 512 divides into blocks of 64, below its minimum block of 128 ('min 128'); the other spatial axes of the output ('@b' = 1, '@h' = 4) are not multiples of 8
// CHECK: shift-shard-min-block.mlir:18:3: note: '@i' declares its minimum block here
// CHECK: exit status 1
// The same through mercury-run.
// RUN: %if mercury-run %{ %exit-status %mercury-run %s --shift-shard --backend cpu 2>&1 | FileCheck %s --check-prefix=DRIVER %}
// DRIVER: error: shift-shard: no spatial axis of the output can be distributed over the 8 devices of '@mesh': '@i' = 512 divides into blocks of 64
// DRIVER: exit status 1
// An axis that does not divide at all keeps the plain reason (lit/passes/shift-shard.mlir).

commir.mesh @mesh shape [8] names ["gpu"]
commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 4 spatial
  commir.axis @i = 512 spatial min 128
  commir.axis @j = 512 managed min 128
  commir.buffer @Q : [@b, @h, @i, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 64] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 64] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = false} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
