// Without a usable GPU, mercury-gpu-bench says so as an error, with the prefix mercury-run and
// mercury-mgpu use (`<tool>: error: ...`), and exits 2 (it printed `mercury-gpu-bench: no
// usable GPU: ...`, without `error:`). Valid --only names (any case) get that far.
// REQUIRES: mercury-gpu-bench
// UNSUPPORTED: gpu
// RUN: %exit-status %mercury-gpu-bench --only p2c,P3 2>&1 | FileCheck %s
// CHECK: {{^}}mercury-gpu-bench: error: no usable GPU:
// CHECK: exit status 2
