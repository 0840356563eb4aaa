// mercury-run --launcher: arguments that cannot be honoured are refused before anything runs
// (no GPU needed), with a message that says why.
// REQUIRES: mercury-run
// RUN: not %mercury-run %repo/examples/small/attention.mlir --backend cpu --launcher env 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: error: --launcher starts the CUDA backend in several processes; the CPU backend runs every rank in one process
// RUN: not %mercury-run %repo/examples/small/attention.mlir --launcher env --transport peer 2>&1 | FileCheck %s --check-prefix=PEER
// PEER: error: --launcher env talks between processes through NCCL; it does not take --transport peer
// RUN: not %mercury-run %repo/examples/small/attention.mlir --launcher env --virtual --devices 2 2>&1 | FileCheck %s --check-prefix=DEVICES
// DEVICES: error: --launcher with --virtual runs each process's ranks on one GPU
// The launcher's environment is read before any GPU is opened.
// RUN: env -u RANK -u WORLD_SIZE not %mercury-run %repo/examples/small/attention.mlir --launcher env --virtual 2>&1 | FileCheck %s --check-prefix=NOENV
// NOENV: mercury-run: error: --launcher env: RANK and WORLD_SIZE are not set
// RUN: env RANK=3 WORLD_SIZE=2 not %mercury-run %repo/examples/small/attention.mlir --launcher env --virtual 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// OUTSIDE: mercury-run: error: --launcher env: RANK 3 outside WORLD_SIZE 2
