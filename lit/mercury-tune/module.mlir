// mercury-tune --module: the graph-level search over a module of several kernels (the Llama-3
// layer of examples/small/llama3_layer.mlir, 8 kernels on 8 ranks): every kernel's schedule and
// every edge's placement chosen together by the cost model, weights charged per device, beside
// the 3D-parallel configurations priced by the same model. The pick (DIR/layer.sched) runs
// through mercury-run --module on the CPU executor and equals the unscheduled module in f64.
// REQUIRES: mercury-tune, mercury-run
// RUN: rm -rf %t && %mercury-tune %repo/examples/small/llama3_layer.mlir --module --topology h100-2x4 --layers 32 --out %t/a | FileCheck %s
// RUN: FileCheck %s --check-prefix=SCHED < %t/a/layer.sched
// RUN: %mercury-run %repo/examples/small/llama3_layer.mlir --module --schedule %t/a/layer.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// RUN: %mercury-tune %repo/examples/small/llama3_layer.mlir --module --topology h100-1x8 --out %t/b > %t/b.log
// RUN: %mercury-run %repo/examples/small/llama3_layer.mlir --module --schedule %t/b/layer.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// The same layer on a two-level mesh [2, 4] (the activations over both levels): the search
// also takes pairs of axes (one per level), and the configurations are the products, tensor
// parallelism over level 1 times context parallelism over level 0; the pick and both products'
// schedules equal the unscheduled module in f64.
// RUN: sed -e 's/shape \[8\] names \["gpu"\] bandwidth \[450.0\]/shape [2, 4] names ["cp", "tp"] bandwidth [450.0, 450.0]/' -e 's/S(0)/S(0, 1)/g' %repo/examples/small/llama3_layer.mlir > %t/layer_2x4.mlir
// RUN: %mercury-tune %t/layer_2x4.mlir --module --topology h100-2x4 --layers 32 --out %t/d | FileCheck %s --check-prefix=PRODUCT
// RUN: %mercury-run %t/layer_2x4.mlir --module --schedule %t/d/layer.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// RUN: %mercury-run %t/layer_2x4.mlir --module --schedule %t/d/baseline-tpxcp-ring.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// RUN: %mercury-run %t/layer_2x4.mlir --module --schedule %t/d/baseline-tpxcp-all-gather.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// The layer at batch 2 (the QKV projection a product over the batch and the heads): the pick
// equals the unscheduled module in f64.
// RUN: sed -e 's/commir.axis @b = 1 spatial/commir.axis @b = 2 spatial/' %repo/examples/small/llama3_layer.mlir > %t/layer_b2.mlir
// RUN: %mercury-tune %t/layer_b2.mlir --module --topology h100-1x8 --out %t/e > %t/e.log
// RUN: %mercury-run %t/layer_b2.mlir --module --schedule %t/e/layer.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// At batch 8 data parallelism lowers (the batch split over the 8 ranks, activations kept
// batch-split between kernels); its schedule equals the unscheduled module in f64.
// RUN: sed -e 's/commir.axis @b = 1 spatial/commir.axis @b = 8 spatial/' %repo/examples/small/llama3_layer.mlir > %t/layer_b8.mlir
// RUN: %mercury-tune %t/layer_b8.mlir --module --topology h100-1x8 --out %t/f | FileCheck %s --check-prefix=DATA
// RUN: %mercury-run %t/layer_b8.mlir --module --schedule %t/f/baseline-dp.sched --backend cpu --check | FileCheck %s --check-prefix=PICK
// RUN: FileCheck %s --check-prefix=DPSCHED < %t/f/baseline-dp.sched
// RUN: %exit-status %mercury-tune %repo/examples/small/llama3_layer.mlir --module --kernel attention --topology h100-1x8 --out %t/c 2>&1 | FileCheck %s --check-prefix=FLAGS
// RUN: %exit-status %mercury-tune %repo/examples/small/llama3_layer.mlir --module --topology h100-4x4 --out %t/c 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: printf "kind = \"attention\"\n" > %t/op.toml && %exit-status %mercury-tune %t/op.toml --module --topology h100-1x8 --out %t/c 2>&1 | FileCheck %s --check-prefix=TOML
// RUN: not %mercury-tune %repo/examples/small/llama3_layer.mlir --layers 32 --topology h100-1x8 --out %t/c 2>&1 | FileCheck %s --check-prefix=LAYERS

// CHECK: module {{.*}}llama3_layer.mlir on h100-2x4 (8 kernels; usable 76.0 GB per device)
// CHECK-NEXT: pick: {{[0-9.]+}} ms, {{[0-9.]+}} GB per device (32 layers' weights)
// CHECK-NEXT: @attn_norm: {{.*}}, outputs {{.*}} ms)
// CHECK: @residual: {{.*}}, outputs declared ({{.*}} ms)
// CHECK: memory frontier (fastest first; every point fits):
// CHECK: 3D-parallel configurations (the same model):
// CHECK-NEXT: TP+SP: {{[0-9.]+}} ms, {{.*}} (pick {{[0-9.]+}}x)
// CHECK-NEXT: CP ring: {{[0-9.]+}} ms
// CHECK-NEXT: CP all-gather: {{[0-9.]+}} ms
// CHECK-NEXT: Ulysses: {{[0-9.]+}} ms
// CHECK-NEXT: DP: none lowers and fits
// CHECK-NEXT: wrote {{.*}}layer.sched (run it: mercury-run

// PRODUCT: module {{.*}}layer_2x4.mlir on h100-2x4 (8 kernels; usable 76.0 GB per device)
// PRODUCT: 3D-parallel configurations (the same model):
// PRODUCT-NEXT: TPxCP ring: {{[0-9.]+}} ms, {{.*}} (pick {{[0-9.]+}}x)
// PRODUCT-NEXT: TPxCP all-gather: {{[0-9.]+}} ms, {{.*}} (pick {{[0-9.]+}}x)
// PRODUCT: wrote the configurations' schedules: {{.*}}baseline-tpxcp-ring.sched, {{.*}}baseline-tpxcp-all-gather.sched

// SCHED: # The layer search's pick for {{.*}}llama3_layer.mlir on h100-2x4: predicted
// SCHED: # @attn_norm:
// SCHED-NEXT: {{.*}}kernel=attn_norm
// SCHED: # @residual:
// SCHED-NEXT: {{.*}}kernel=residual

// PICK-COUNT-8: check of @
// PICK-NOT: FAILED

// FLAGS: mercury-tune: error: --module searches every kernel of the module together on the model; it does not take --kernel
// FLAGS: exit status 1
// DEVICES: mercury-tune: error: {{.*}}llama3_layer.mlir: the module's mesh has 8 devices, topology 'h100-4x4' has 16
// DEVICES: exit status 1
// TOML: mercury-tune: error: --module takes a CommIR module of several kernels (.mlir); '{{.*}}.toml' is not one
// TOML: exit status 1
// LAYERS: error: the following required arguments were not provided:
// LAYERS: --module

// DATA: DP: {{[0-9.]+}} ms, {{[0-9.]+}} GB per device
// DPSCHED: # @attn_norm: par(b), outputs by(b)
