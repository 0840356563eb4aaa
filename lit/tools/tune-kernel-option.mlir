// mercury-tune --kernel: a file holding several kernels is tuned one kernel at a time; the
// schedule's passes transform that kernel alone, and schedule.transform applies to the file
// as given with mercury-run --kernel (the other kernels stay as they are).
// REQUIRES: mercury-tune, mercury-run
// RUN: not %mercury-tune %S/Inputs/two-kernels.mlir --topology h100-1x4 --out %t.none 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NONE
// NONE: mercury-tune: error: {{.*}}two-kernels.mlir: expected one kernel, found 2 (@gemm, @lw); name the one to tune (mercury-tune --kernel NAME)
// RUN: not %mercury-tune %S/Inputs/two-kernels.mlir --topology h100-1x4 --out %t.none --kernel nope 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: {{.*}}two-kernels.mlir: no kernel '@nope' (the file has @gemm, @lw)
// --refactor-mesh re-shapes the tuned kernel's mesh alone (reshape-mesh with the kernel as
// its target): @gemm goes from [4] to the 8 devices of h100-2x4, @lw keeps its mesh [2].
// RUN: rm -rf %t.re && %mercury-tune %S/Inputs/two-kernels.mlir --topology h100-2x4 --out %t.re --kernel gemm --refactor-mesh 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REFACTOR
// REFACTOR: apply: mercury-run {{.*}}two-kernels.mlir --kernel gemm --schedule {{.*}}schedule.transform
// RUN: FileCheck %s --check-prefix=TRANSFORM < %t.re/schedule.transform
// TRANSFORM: reshape-mesh{shape=2x2x2}
// RUN: %mercury-opt --kernel gemm --schedule=%t.re/schedule.transform %S/Inputs/two-kernels.mlir | FileCheck %s --check-prefix=MESHES
// MESHES:      commir.mesh @mesh shape [2, 2, 2]
// MESHES-NEXT: commir.mesh @mesh2 shape [2] names ["x"]
// RUN: %mercury-run %S/Inputs/two-kernels.mlir --kernel gemm --schedule %t.re/schedule.transform \
// RUN:   --backend cpu --check 2>&1 | FileCheck %s --check-prefix=REAPPLY
// REAPPLY: comm-plan @gemm: mesh [2, 2, 2], 8 ranks
// REAPPLY: check @C: relative error {{.*}}  ok
// REAPPLY-NOT: error:
// RUN: not %mercury-tune %repo/tools/mercury-tune/examples/gemm-4096.toml --topology h100-1x4 --out %t.none --kernel gemm 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TOML
// TOML: error: --kernel gemm: only a CommIR operator (.mlir) names its kernels
// RUN: rm -rf %t.out && %mercury-tune %S/Inputs/two-kernels.mlir --topology h100-1x4 --out %t.out --kernel @gemm \
// RUN:   --profile-top 2 --backend cpu 2>&1 | FileCheck %s --check-prefix=TUNE
// TUNE: operator: CommIR kernel @gemm from
// TUNE: profiled
// TUNE: apply: mercury-run {{.*}}two-kernels.mlir --kernel gemm --schedule {{.*}}schedule.transform
// RUN: %mercury-run %S/Inputs/two-kernels.mlir --kernel gemm --schedule %t.out/schedule.transform \
// RUN:   --backend cpu --check 2>&1 | FileCheck %s --check-prefix=APPLY
// APPLY: comm-plan @gemm: mesh [4], 4 ranks
// APPLY: check @C: relative error {{.*}}  ok
// APPLY-NOT: error:
