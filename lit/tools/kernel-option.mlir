// --kernel limits the schedule to that kernel: every pass that can be limited to one (a
// `kernel=` option, `on=` for patch) and names none transforms the --kernel one alone, in
// mercury-run and mercury-opt (PassManager::default_target). Found by a new-user pass: with
// two kernels, `--shift-shard --kernel gemm` failed on the other kernel @lw, and a schedule
// of @gemm failed with "tile: '@m' is not an axis of '@lw'".
// REQUIRES: mercury-run
// RUN: %mercury-run %S/Inputs/two-kernels.mlir --shift-shard --kernel gemm --backend cpu --check --seed 1 \
// RUN:   2>&1 | FileCheck %s --check-prefix=SHIFT
// SHIFT: comm-plan @gemm: mesh [4], 4 ranks
// SHIFT: check @C: relative error {{.*}}  ok
// SHIFT-NOT: @lw
// RUN: %mercury-run %S/Inputs/two-kernels.mlir --schedule %S/Inputs/two-kernels-gemm.sched --kernel @gemm \
// RUN:   --backend cpu --check --seed 1 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: check @C: relative error {{.*}}  ok
// SCHED-NOT: error:
// The schedule of @gemm asked of @lw fails on @lw, and the note shows the kernel it was given.
// RUN: not %mercury-run %S/Inputs/two-kernels.mlir --schedule %S/Inputs/two-kernels-gemm.sched --kernel lw \
// RUN:   --backend cpu 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: two-kernels.mlir:17:1: error: tile: '@m' is not an axis of '@lw'
// OTHER: two-kernels-gemm.sched:2:1: note: in pass 'tile{axis=m factor=4 outer=m0 inner=mt kernel=lw}'
// A kernel the pass names itself wins over --kernel: @gemm is tiled, @lw lowered.
// RUN: %mercury-run %S/Inputs/two-kernels.mlir --pass-pipeline='builtin.module(tile{axis=m factor=4 kernel=gemm})' \
// RUN:   --kernel lw --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=NAMED
// NAMED-NOT: error:
// NAMED: comm-plan @lw: mesh [2], 2 ranks
// RUN: %mercury-opt %S/Inputs/two-kernels.mlir --schedule %S/Inputs/two-kernels-gemm.sched --kernel gemm \
// RUN:   | FileCheck %s --check-prefix=OPT
// OPT: commir.kernel @gemm on @mesh {
// OPT: commir.for @m0 parallel(0) {
// OPT: commir.kernel @lw on @mesh2 {
// OPT-NEXT: commir.axis @i = 4 spatial
// RUN: %mercury-opt %S/Inputs/two-kernels.mlir --shift-shard --kernel gemm --emit=plan | FileCheck %s --check-prefix=OPT-PLAN
// OPT-PLAN: "name": "gemm"
// RUN: %mercury-opt %S/Inputs/two-kernels.mlir --kernel gemm --commir-print-comm-plan 2>&1 | FileCheck %s --check-prefix=OPT-PRINT
// OPT-PRINT: comm-plan @gemm
// OPT-PRINT-NOT: comm-plan @lw
// Without --kernel, a plan of two kernels names them and the option that picks one, located at
// the second kernel; a kernel that is not there is said with those the module has.
// RUN: %exit-status %mercury-opt %S/Inputs/two-kernels.mlir --emit=plan 2>&1 | FileCheck %s --check-prefix=OPT-SEVERAL
// OPT-SEVERAL: two-kernels.mlir:17:1: error: the module has several kernels (@gemm, @lw); choose one with --kernel NAME
// OPT-SEVERAL: exit status 1
// A kernel --kernel names is looked up whatever reads the flag (it was ignored without a
// pass or --emit=plan, exit 0), and the error stands at the module's first kernel.
// RUN: %exit-status %mercury-opt %S/Inputs/two-kernels.mlir --kernel nope --emit=plan 2>&1 | FileCheck %s --check-prefix=OPT-NOPE
// RUN: %exit-status %mercury-opt %S/Inputs/two-kernels.mlir --kernel nope 2>&1 | FileCheck %s --check-prefix=OPT-NOPE
// OPT-NOPE: two-kernels.mlir:5:1: error: no commir.kernel named '@nope': the module's kernels are '@gemm', '@lw'
// OPT-NOPE: exit status 1
