// mercury-run whose stdout cannot be written (closed by `| head -1`, or a full device) drops
// its lines instead of panicking; the exit status still reports the checks (found by a
// new-user pass: `mercury-run ... --check | head -1` exited 101).
// REQUIRES: mercury-run
// RUN: timeout 120 %mercury-run %S/../lowering/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --backend cpu --check > /dev/full
