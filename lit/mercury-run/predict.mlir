// mercury-run --predict: the cost model's time for the compiled plan on a topology, printed
// before the run; a topology the plan does not fit, or one that cannot be read, is refused
// before anything runs.
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu --check --predict h100-1x8 2>&1 | FileCheck %s
// CHECK: model: predicted {{[0-9]+\.[0-9]+}} ms on topology 'h100-1x8' (8 devices)
// CHECK: check @O: relative error
// The CPU executor's time is not a GPU time: no comparison is printed for it.
// CHECK-NOT: model vs measured
// RUN: not %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu --predict h100-1x4 2>&1 | FileCheck %s --check-prefix=FEW
// FEW: mercury-run: error: --predict h100-1x4: the topology does not fit the plan: plan 'attention' has 8 ranks but topology 'h100-1x4' has 4 devices
// FEW-NOT: cpu:
// RUN: not %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu --predict %t.missing.toml 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mercury-run: error: --predict {{.*}}missing.toml: {{.*}}neither a topology preset nor a readable file
// --no-run compiles, prices and stops: no device and no executor.
// RUN: %mercury-run %repo/examples/attention.mlir --shift-shard --no-run --predict h200-1x8 2>&1 | FileCheck %s --check-prefix=DRY
// DRY: comm-plan @attention: mesh [8]
// DRY: model: predicted {{[0-9]+\.[0-9]+}} ms on topology 'h200-1x8' (8 devices)
// DRY-NOT: {{cpu:|gpu|no GPU|CUDA}}
// --predict-trace writes the model's timeline (Chrome / Perfetto JSON): every op with its stage.
// RUN: %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict h100-1x8 --predict-trace %t.trace.json 2>&1 | FileCheck %s --check-prefix=TRACE
// TRACE: model: timeline written to {{.*}}trace.json
// RUN: FileCheck %s --check-prefix=TRACEJSON < %t.trace.json
// TRACEJSON: "plan":"attention on h100-1x8","predicted_latency_s"
// TRACEJSON-SAME: "traceEvents"
// TRACEJSON-SAME: "name":"attention {{.*}}","ph":"X"
// RUN: not %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict-trace %t.alone.json 2>&1 | FileCheck %s --check-prefix=TRACEALONE
// TRACEALONE: --predict <TOPOLOGY>
// RUN: not %mercury-run %repo/examples/small/attention.mlir --no-run --check 2>&1 | FileCheck %s --check-prefix=DRYCHECK
// DRYCHECK: error: --no-run compiles only; --check, --bench, --cache-file, --launcher and --inject-fault need a run
// A plan the topology's devices cannot hold is not priced (it was: a time for a plan needing
// 0.29 GB per rank on devices with 0.1 GB usable, where mercury-tune marks it over memory).
// RUN: not %mercury-run %repo/examples/attention.mlir --shift-shard --backend cpu --no-run --predict %S/Inputs/h100-1x8-10mb.toml 2>&1 | FileCheck %s --check-prefix=MEM
// MEM: mercury-run: error: --predict {{.*}}: the plan does not fit topology 'h100-1x8-10mb': rank {{[0-9]+}} needs {{.*}} GB of 0.01 GB usable per device
// MEM-NOT: model: predicted
