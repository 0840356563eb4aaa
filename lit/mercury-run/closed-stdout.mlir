// mercury-run whose stdout cannot be written drops its lines instead of panicking (found by a
// new-user pass: `mercury-run ... --check | head -1` exited 101). A pipe closed by its reader
// (`| head -1`) is no failure: the exit status still reports the checks. A full device loses
// the report, so the run fails and says so (it exited 0; thirteenth new-user pass).
// REQUIRES: mercury-run
// The shell, not lit, opens /dev/full: lit prints a failed command's redirected files, and
// reading /dev/full never ends (lit grew to 24 GB and hung when this test failed).
// RUN: not sh -c "timeout 120 %mercury-run %S/../lowering/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --backend cpu --check > /dev/full" 2> %t.err
// RUN: FileCheck %s --check-prefix=FULL < %t.err
// FULL: mercury-run: error: could not write standard output: No space left on device
// RUN: timeout 120 %mercury-run %S/../lowering/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --backend cpu --check | head -c 1 > /dev/null
