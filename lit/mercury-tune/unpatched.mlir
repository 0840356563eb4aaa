// An operator whose attention or GEMM is written with tile ops (examples/attention_naive.mlir,
// examples/mlp.mlir) is recognised as the library patch first, as mercury-opt --patch does:
// the search needs the patch to know the operator, and every candidate's transform starts
// with `patch`, so that it applies to the input as given, as mercury-run runs it. Found by a
// new-user pass: both README examples failed with "candidate source failed: X.mlir: the
// kernel has no patch". One that is neither, or holds several, is a located error saying so.
// REQUIRES: mercury-run, mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %S/Inputs/attention-naive-small.mlir --topology h200-1x8 --out %t/out \
// RUN:   --profile-top 2 --backend cpu --iters 1 | FileCheck %s --check-prefix=TUNE
// TUNE: operator:  CommIR kernel @attention from {{.*}}attention-naive-small.mlir
// TUNE: chosen:    mesh 8: {{.*}} measured {{[0-9.]+ (us|ms|s)}}
// TUNE: model #1
// TUNE: model #2
// RUN: FileCheck %s --check-prefix=SCRIPT < %t/out/schedule.transform
// SCRIPT: # mesh 8:
// SCRIPT-NEXT: # mesh shape [8]
// SCRIPT-NEXT: {{^patch$}}
// The transform applies to the input as given.
// RUN: %mercury-run %S/Inputs/attention-naive-small.mlir --schedule %t/out/schedule.transform --backend cpu \
// RUN:   --check --seed 1 | FileCheck %s --check-prefix=CHECKED
// CHECKED: check @O: relative error {{.*}}  ok
// The naive example of the README, searched on the model only.
// RUN: %mercury-tune %repo/examples/attention_naive.mlir --topology h100-1x8 --out %t/naive | FileCheck %s --check-prefix=NAIVE
// NAIVE: chosen:    mesh 8:
// RUN: %exit-status %mercury-tune %repo/examples/mlp.mlir --topology h100-1x4 --out %t/mlp 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MLP
// MLP: {{^[^ ]*}}mlp.mlir:12:1: error: mercury-tune generates the schedules of a kernel computing one attention or one GEMM; '@mlp': it has 2 (gemm, gemm, after the `patch` pass;
// MLP-SAME: Write its schedule by hand, a schedule script for mercury-run --schedule
// MLP-NEXT: commir.kernel @mlp on @mesh {
// MLP: exit status 1
// RUN: %exit-status %mercury-tune %S/Inputs/elementwise.mlir --topology h100-1x4 --out %t/ew 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEITHER
// NEITHER: {{^[^ ]*}}elementwise.mlir:4:1: error: mercury-tune generates the schedules of a kernel computing one attention or one GEMM; '@ew': it computes neither (the `patch` pass recognises no attention or GEMM in its tile ops)
// NEITHER: exit status 1
