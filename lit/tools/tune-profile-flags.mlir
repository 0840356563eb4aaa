// mercury-tune refuses profiling flags nothing would read, as mercury-run does (a new-user
// pass: they were accepted and ignored, and --iters 0 was raised to 1).
// REQUIRES: mercury-tune
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 1 --backend cpu --devices 3 --virtual 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: mercury-tune: error: --backend cpu does not read --virtual, --devices (GPU backend flags): the CPU executor runs every rank in one process; drop them, or profile with --backend cuda
// CPU: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --transport nccl 2>&1 | FileCheck %s --check-prefix=NOPROFILE
// NOPROFILE: mercury-tune: error: --transport only sets what --profile-top K measures, and without it nothing is profiled: add --profile-top K, or drop it
// NOPROFILE: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --backend cpu --iters 5 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: --backend cpu, --iters only set what --profile-top K measures
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 1 --backend cpu --iters 0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: mercury-tune: error: --iters must be at least 1
// ZERO: exit status 1
