// RUN: %mercury-opt --shift-shard --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s
// RUN: %mercury-opt --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s --check-prefix=LOCAL

// RingAttention keeps its 32 MiB shards of Q, K and V, two ring buffers each for K and V, and
// the f32 accumulators of the output (the attention patch merges into them directly).
// CHECK: // memory @attention: 288.5 MiB per rank at most (8 ranks)
// CHECK-NOT: attention.out
// CHECK: //   rank {{[0-9]+}}: @K: 96.0 MiB (K.shard [1, 32, 4096, 128] bf16, K.ring{{.*}}, K.ring{{.*}})

// Without a schedule every GPU gathers the whole K and V (256 MiB each).
// LOCAL: // memory @attention: {{.*}} GiB per rank at most (8 ranks)
