// Without a usable GPU, mercury-gpu-bench says so as an error, with the prefix mercury-run and
// mercury-mgpu use (`<tool>: error: ...`), and exits 2 (it printed `mercury-gpu-bench: no
// usable GPU: ...`, without `error:`). Valid --only names (any case) get that far.
// REQUIRES: mercury-gpu-bench
// UNSUPPORTED: gpu
// RUN: %exit-status %mercury-gpu-bench --only p2c,P3 2>&1 | FileCheck %s
// CHECK: {{^}}mercury-gpu-bench: error: no usable GPU:
// CHECK: exit status 2

// The command lines scripts/gpu.sh runs parse (clap reads them since branch `clap`): each gets
// as far as the no-GPU error, exit 2; the `--opt=value` forms too.
// REQUIRES: mercury-mgpu
// RUN: %exit-status %mercury-gpu-bench --device-kernels-ptx %s --sdpa-json %t.sdpa.json --only P0,P1,P2,P2c,P3 --json-out %t.bench.json 2>&1 | FileCheck %s --check-prefix=NOGPU
// RUN: %exit-status %mercury-gpu-bench --device-kernels-ptx=%s --only=p0 --reps=3 --warmup=0 --seed=7 --no-check 2>&1 | FileCheck %s --check-prefix=NOGPU
// NOGPU: {{^}}mercury-gpu-bench: error: no usable GPU:
// NOGPU: exit status 2
// RUN: %exit-status %mercury-mgpu info 2>&1 | FileCheck %s --check-prefix=MGPU
// RUN: %exit-status %mercury-mgpu links --measure-rates --max-devices 1 --out %t.rates.toml 2>&1 | FileCheck %s --check-prefix=MGPU
// RUN: %exit-status %mercury-mgpu links --measure-rates --out %t.measured.toml 2>&1 | FileCheck %s --check-prefix=MGPU
// RUN: %exit-status %mercury-mgpu selfcheck --transport both --device-kernels-ptx %s 2>&1 | FileCheck %s --check-prefix=MGPU
// RUN: %exit-status env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE=%t.id %mercury-mgpu links --launcher env --ranks-per-process 4 --max-mib 256 --reps 5 --attention-tflops 627 --attention-causal-tflops 640 --out %t.two-tier.toml 2>&1 | FileCheck %s --check-prefix=MGPU
// RUN: %exit-status %mercury-mgpu links --max-mib=256 --reps=5 --attention-tflops=627 --out=%t.eq.toml 2>&1 | FileCheck %s --check-prefix=MGPU
// MGPU: {{^}}mercury-mgpu: error: {{.*(driver|GPU|libcuda)}}
// MGPU: exit status 2
