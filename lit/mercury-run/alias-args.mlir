// mercury-run --alias K (the peer-copy paths of K GPUs on GPU 0): arguments that cannot be
// honoured are refused before anything runs (no GPU needed).
// REQUIRES: mercury-run
// RUN: not %mercury-run %repo/examples/small/attention.mlir --alias 1 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: error: --alias must be at least 2 (one device id is the virtual mode: --virtual)
// RUN: not %mercury-run %repo/examples/small/attention.mlir --alias 2 --devices 2 --virtual 2>&1 | FileCheck %s --check-prefix=DEVICES
// DEVICES: error: --alias places rank r on device id r % K, every id on GPU 0, with peer copies between ids; it does not take --devices, --virtual
// RUN: not %mercury-run %repo/examples/small/attention.mlir --alias 2 --transport nccl 2>&1 | FileCheck %s --check-prefix=NCCL
// NCCL: error: {{.*}}it does not take --transport nccl
// RUN: not %mercury-run %repo/examples/small/attention.mlir --alias 2 --backend cpu 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: error: --backend cpu does not read --alias
