// RUN: %mercury-opt --shift-shard --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s
// RUN: %mercury-opt --commir-print-memory %repo/examples/attention.mlir -o /dev/null | FileCheck %s --check-prefix=LOCAL

// RingAttention keeps its 32 MiB shards of Q, K and V, two ring buffers each for K and V, the
// f32 attention result of the current step and the f32 accumulators of the output.
// CHECK: // memory @attention: 353.0 MiB per rank at most (8 ranks)
// CHECK: //   rank {{[0-9]+}}: @K: 96.0 MiB (K.shard [1, 32, 4096, 128] bf16, K.ring{{.*}}, K.ring{{.*}})

// Without a schedule every GPU gathers the whole K and V (256 MiB each).
// LOCAL: // memory @attention: {{.*}} GiB per rank at most (8 ranks)
