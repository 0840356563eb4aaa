// mercury-run --backend cpu: flags only the GPU backend reads are refused, not ignored
// silently (no GPU needed).
// REQUIRES: mercury-run
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --virtual --check 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// VIRTUAL: error: --backend cpu does not read --virtual (GPU backend flag): the CPU executor runs every rank in one process; drop it, or run with --backend cuda
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --devices 2 --transport nccl --attention nvrtc 2>&1 | FileCheck %s --check-prefix=SEVERAL
// SEVERAL: error: --backend cpu does not read --devices, --transport, --attention (GPU backend flags)
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --stage-timeout 5 --inject-fault exit-rank=1@stage=2 2>&1 | FileCheck %s --check-prefix=FAULTS
// FAULTS: error: --backend cpu does not read --stage-timeout, --inject-fault (GPU backend flags)
// The CPU run itself takes the flags it reads.
// RUN: %mercury-run %repo/examples/small/attention.mlir --backend cpu --check --seed 3 --tolerance 1e-9 | FileCheck %s --check-prefix=OK
// OK: check @O: relative error {{.*}} ok
