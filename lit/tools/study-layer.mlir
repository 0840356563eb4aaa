// mercury-study layer: the graph-level tables of docs/simulation.md (the Llama-3 layer searched
// as one module against the 3D-parallel configurations, and its 2M-token memory frontier),
// here restricted to one topology and one length, and the joint pick to the one-level mesh
// (the products over two mesh levels still priced as configurations). An unknown topology is a
// usage error.
// REQUIRES: mercury-study
// RUN: %mercury-study layer --topology h100-1x8 --tokens 4096 --one-level-pick | FileCheck %s
// RUN: %exit-status %mercury-study layer --topology h100-9x9 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: ### Graph level: the Llama-3-8B layer as one module, batch 1 (examples/llama3_layer.mlir; 32 layers' weights per device)
// CHECK: | topology | tokens | joint pick ms | GB/device | best 3D-parallel | its ms | its GB/device | speedup | TP+SP ms | CP ring ms | CP all-gather ms | Ulysses ms | DP ms | TPxCP ring ms | TPxCP all-gather ms | the pick |
// CHECK: | h100-1x8 | 4K | {{[0-9.]+}} | {{[0-9.]+}} | {{[A-Za-z+ -]+}} | {{[0-9.]+}} | {{[0-9.]+}} | {{[0-9.]+}}x | {{[0-9.]+}} | {{[0-9.]+}} | {{[0-9.]+}} | {{[0-9.]+}} | n/a | {{[0-9.]+}} (TP{{[24]}}xCP{{[24]}}) | {{[0-9.]+}} (TP{{[24]}}xCP{{[24]}}) | attn_norm {{.*}}; residual par(i) |
// CHECK: ### Graph level: the Llama-3-70B layer as one module, batch 1 (examples/llama3_layer_70b.mlir; 80 layers' weights per device)
// The 70B weights replicated (80 layers, about 140 GB) fit no H100: of the single strategies only
// tensor parallelism fits, and its products with context parallelism.
// CHECK: | h100-1x8 | 4K | {{[0-9.]+}} | {{[0-9.]+}} | {{TP\+SP|TPxCP [a-z -]+ \(TP[24]xCP[24]\)}} | {{[0-9.]+}} | {{[0-9.]+}} | {{[0-9.]+}}x | {{[0-9.]+}} | does not fit | does not fit | does not fit | n/a | {{[0-9.]+}} (TP{{[24]}}xCP{{[24]}}) |
// CHECK: ### Graph level: the Llama-3-8B layer at 2M tokens, the memory frontier
// CHECK: | h100-1x8 | 1 | 76.0 |
// Batch 16 as micro-batches (passes x sequences): all at once does not fit, one a pass does.
// CHECK: | h100-1x8 | 16 | 76.0 | {{[0-9.]+}} ({{[0-9.]+}}, 16 (1 x 16)) | {{[0-9.]+}} ({{[0-9.]+}}, 16 (16 x 1)) | {{[0-9.]+}} ({{[0-9.]+}}, 16 (16 x 1)) | {{[0-9]+}} of {{[0-9]+}} | attn_norm

// BAD: mercury-study: error: --topology: no preset 'h100-9x9'
// BAD: exit status 1
