// mercury-run --backend cpu: flags only the GPU backend reads are refused, not ignored
// silently (no GPU needed).
// REQUIRES: mercury-run
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --virtual --check 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// VIRTUAL: error: --backend cpu does not read --virtual (GPU backend flag): the CPU executor runs every rank in one process; drop it, or run with --backend cuda
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --devices 2 --transport nccl --attention nvrtc --no-direct-binding 2>&1 | FileCheck %s --check-prefix=SEVERAL
// SEVERAL: error: --backend cpu does not read --devices, --transport, --attention, --no-direct-binding (GPU backend flags)
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --stage-timeout 5 --inject-fault exit-rank=1@stage=2 2>&1 | FileCheck %s --check-prefix=FAULTS
// FAULTS: error: --backend cpu does not read --stage-timeout, --inject-fault (GPU backend flags)
// The CPU run itself takes the flags it reads.
// RUN: %mercury-run %repo/examples/small/attention.mlir --backend cpu --check --seed 3 --tolerance 1e-9 | FileCheck %s --check-prefix=OK
// OK: check @O: relative error {{.*}} ok

// Flags that only set what another flag does are refused without it (an eleventh new-user
// pass: each was accepted and read by nothing).
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --bench 2>&1 | FileCheck %s --check-prefix=BENCH
// BENCH: error: --bench times the GPU backend: the CPU backend is the f64 reference executor, whose times are not GPU times
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --iters 5 --warmup 1 2>&1 | FileCheck %s --check-prefix=ITERS
// ITERS: error: --iters, --warmup only set what --bench times, and without it the schedule runs once: add --bench, or drop them
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --self-reference 2>&1 | FileCheck %s --check-prefix=SELFREF
// SELFREF: error: --self-reference chooses the reference of --check, and there is no --check
// RUN: not %mercury-run %repo/examples/small/attention.mlir --no-run --virtual --devices 3 2>&1 | FileCheck %s --check-prefix=PLACED
// PLACED: error: --no-run compiles only, and --virtual, --devices only set how a run is placed on the GPUs: drop them, or run
// RUN: not %mercury-run %repo/examples/small/attention.mlir --stage-timeout 1e9 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// TIMEOUT: error: --stage-timeout must be a number of seconds from 0.001 to 1e6, got 1000000000
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --tolerance 1e-3 2>&1 | FileCheck %s --check-prefix=TOL
// TOL: error: --tolerance sets what --check accepts, and there is no --check
// RUN: not %mercury-run %repo/examples/small/attention.mlir --no-run --seed 3 2>&1 | FileCheck %s --check-prefix=SEED
// SEED: error: --no-run compiles only, and --seed sets a run's random inputs
