// RUN: %mercury-opt --shift-shard --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s
// RUN: %mercury-opt --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s --check-prefix=LOCAL

// RingAttention keeps its 32 MiB shards of Q, K and V, two ring buffers each for K and V, and
// the f32 accumulators of the output (the attention patch merges into them directly).
// CHECK: // memory @attention: 288.5 MiB per rank at most (8 ranks)
// CHECK-NOT: attention.out
// CHECK: //   rank {{[0-9]+}}: @K: 96.0 MiB (K.shard [1, 32, 4096, 128] bf16, K.ring{{.*}}, K.ring{{.*}})

// Without a schedule every GPU gathers the whole K and V (256 MiB each).
// LOCAL: // memory @attention: {{.*}} GiB per rank at most (8 ranks)

// The naive attention's op results (score tiles, row maxima, ...) belong to no buffer: listed
// together as op results, not under buffers the kernel does not have (`@matmul`).
// RUN: %mercury-opt --schedule=%repo/examples/schedules/ring_attention.sched --commir-print-memory %repo/examples/attention_naive.mlir -o /dev/null | FileCheck %s --check-prefix=NAIVE
// NAIVE:     //   rank {{[0-9]+}}: @V: 96.0 MiB
// NAIVE-NEXT: //   rank {{[0-9]+}}: op results: 7.1 GiB (matmul.out.0 [1, 32, 4096, 4096] f32,
// NAIVE-NOT: @matmul
// NAIVE-NOT: @elementwise
