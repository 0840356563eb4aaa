// Every error mercury-run prints starts with `file:line:col: error:` (located) or
// `mercury-run: error:` (unlocated), exit 1 (2 without a GPU); the prefix is added in one
// place (`Failure::render`). Unlocated messages used to read `mercury-run: <message>`, with
// no `error:`.
// REQUIRES: mercury-run
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu --ranks 3 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANKS
// RANKS: {{^}}mercury-run: error: --ranks 3 but the mesh [8] has 8 ranks
// RANKS: exit status 1
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --ranks 3 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANKS
// RUN: %exit-status %mercury-run %t.missing.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=READ
// READ: {{^}}mercury-run: error: cannot read '{{.*}}missing.mlir':
// READ: exit status 1
// RUN: %exit-status %mercury-run %S/../tools/Inputs/two-kernels.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=SEVERAL
// SEVERAL: {{^}}mercury-run: error: the input has several kernels (@gemm, @lw); choose one with --kernel NAME
// SEVERAL: exit status 1
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --kernel nope --backend cpu 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KERNEL
// KERNEL: {{^}}mercury-run: error: no kernel '@nope' in the input (it has @attention)
// KERNEL: exit status 1
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --schedule %t.missing.sched 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: {{^}}mercury-run: error: cannot read schedule '{{.*}}missing.sched':
// SCHED: exit status 1

// An input that is already scheduled has no unscheduled operator to be held to. Its only
// reference is the same IR on one device, lowered by the same conversion of the tiled body: a
// mask applied at wrong positions was wrong the same way on both sides and passed (new-user
// pass, 2026-12-02). So --check refuses it, located at the first scheduled loop, and names the
// way out; --self-reference asks for the weaker check, with a note saying what it covers.
// RUN: %mercury-opt --shift-shard %repo/examples/small/attention.mlir > %t.scheduled.mlir
// RUN: %exit-status %mercury-run %t.scheduled.mlir --backend cpu --check 2>&1 | FileCheck %s --check-prefix=SCHEDULED
// SCHEDULED: {{^}}{{.*}}scheduled.mlir:{{[0-9]+}}:{{[0-9]+}}: error: --check needs the unscheduled operator: the input is already scheduled (loop over '{{.*}}' is parallel)
// SCHEDULED: note: give the operator and its schedule (--schedule FILE, --shift-shard or --pass-pipeline), or --self-reference
// SCHEDULED-NOT: check @O
// SCHEDULED: exit status 1
// RUN: %exit-status %mercury-run %t.scheduled.mlir --backend cpu --check --self-reference 2>&1 | FileCheck %s --check-prefix=SELF
// SELF: {{^}}mercury-run: note: the input is already scheduled: the reference is this IR on one device, its loops in turn; a check against it covers the distribution, not the lowering of the tiled body
// SELF-NOT: mercury-run: note:
// SELF: check @O: relative error {{.*}} ok
// SELF: exit status 0

// On a GPU machine, more GPUs than are visible; elsewhere no GPU (exit 2). Either way the
// message says `mercury-run: error:`.
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --devices 4096 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DEVICES
// DEVICES: {{^}}mercury-run: error: {{--devices 4096 but only [0-9]+ GPU\(s\) are visible|no usable GPU}}
// DEVICES: exit status {{1|2}}

// No message in the sources carries the prefix itself (it would print twice): the prefix
// belongs to `Failure::render` alone.
// RUN: not grep -rn '"mercury-run: ' %repo/tools/mercury-run/src
