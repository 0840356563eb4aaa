// The tools that read their arguments by hand (mercury-mgpu, mercury-gpu-bench, mercury-study)
// and mercury-fuzz refuse bad values before any GPU is probed: `<tool>: error: ...`, exit 1.
// Found by a new-user pass: these were taken as given (a rate of -1 or NaN headed for the
// topology file, --rates-gap-ms -5 clamped to 0, --only bogus ran no section and passed,
// --threads 0 ran on), ignored (`info extra`), or the last of two wins.
// REQUIRES: mercury-mgpu, mercury-gpu-bench, mercury-study, mercury-fuzz

// Patch rates given to `links` go into the topology file: the range its loader accepts.
// RUN: %exit-status %mercury-mgpu links --gemm-tflops -1 2>&1 | FileCheck %s --check-prefix=TFLOPS
// TFLOPS: mercury-mgpu: error: --gemm-tflops -1: must be a finite number of TFLOP/s in [1e-6, 1e6] (the range of a topology file's rates)
// TFLOPS-NOT: GPU
// TFLOPS: exit status 1
// RUN: %exit-status %mercury-mgpu links --attention-tflops nan 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: mercury-mgpu: error: --attention-tflops nan: must be a finite number of TFLOP/s in [1e-6, 1e6]
// NAN: exit status 1
// RUN: %exit-status %mercury-mgpu links --attention-causal-tflops inf 2>&1 | FileCheck %s --check-prefix=INF
// INF: mercury-mgpu: error: --attention-causal-tflops inf: must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops 0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: mercury-mgpu: error: --gemm-tflops 0: must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops 2e6 2>&1 | FileCheck %s --check-prefix=HIGH
// HIGH: mercury-mgpu: error: --gemm-tflops 2e6: must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops x 2>&1 | FileCheck %s --check-prefix=NOTNUM
// NOTNUM: mercury-mgpu: error: --gemm-tflops x: invalid float literal
// NOTNUM: exit status 1
// The measurement regime: negatives refused, not clamped to 0.
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-gap-ms -5 2>&1 | FileCheck %s --check-prefix=GAP
// GAP: mercury-mgpu: error: --rates-gap-ms -5: must be a finite number of milliseconds in [0, 10000]
// GAP: exit status 1
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-burst-ms -1 2>&1 | FileCheck %s --check-prefix=BURST
// BURST: mercury-mgpu: error: --rates-burst-ms -1: must be a finite number of milliseconds in [0, 10000]
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-warm-s nan 2>&1 | FileCheck %s --check-prefix=WARM
// WARM: mercury-mgpu: error: --rates-warm-s nan: must be a finite number of seconds in [0, 3600]
// WARM: exit status 1

// `info` takes no arguments.
// RUN: %exit-status %mercury-mgpu info extra 2>&1 | FileCheck %s --check-prefix=INFO
// INFO: mercury-mgpu: error: info takes no arguments (got 'extra')
// INFO: exit status 1

// An option given twice (mercury-opt's rule, lit/mercury-opt/repeated-option.mlir).
// RUN: %exit-status %mercury-mgpu selfcheck --devices 2 --devices 3 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: mercury-mgpu: error: --devices given twice ('--devices 2', then '--devices 3'); give each option once
// TWICE: exit status 1
// RUN: %exit-status %mercury-mgpu links --mib 64 --max-mib 128 2>&1 | FileCheck %s --check-prefix=ALIAS-NAME
// ALIAS-NAME: mercury-mgpu: error: --max-mib given twice ('--mib 64', then '--max-mib 128'); give each option once
// RUN: %exit-status %mercury-mgpu links --no-nccl --no-nccl 2>&1 | FileCheck %s --check-prefix=SWITCH
// SWITCH: mercury-mgpu: error: --no-nccl given twice ('--no-nccl', then '--no-nccl'); give each option once
// RUN: %exit-status %mercury-gpu-bench --reps 5 --reps 6 2>&1 | FileCheck %s --check-prefix=BENCH-TWICE
// BENCH-TWICE: mercury-gpu-bench: error: --reps given twice ('--reps 5', then '--reps 6'); give each option once
// BENCH-TWICE-NOT: GPU
// BENCH-TWICE: exit status 1
// RUN: %exit-status %mercury-gpu-bench --no-check --check 2>&1 | FileCheck %s --check-prefix=BENCH-CHECK
// BENCH-CHECK: mercury-gpu-bench: error: --check given twice ('--no-check', then '--check'); give each option once
// RUN: %exit-status %mercury-study --no-timing --no-timing 2>&1 | FileCheck %s --check-prefix=STUDY
// STUDY: mercury-study: error: --no-timing given twice ('--no-timing', then '--no-timing'); give each option once
// STUDY: exit status 1

// selfcheck: --devices and --alias exclude each other (--devices was ignored), and an
// unreadable --device-kernels-ptx is said before the GPU, as a usage error.
// RUN: %exit-status %mercury-mgpu selfcheck --devices 2 --alias 3 2>&1 | FileCheck %s --check-prefix=DEV-ALIAS
// DEV-ALIAS: mercury-mgpu: error: --devices 2 and --alias 3: one or the other (--alias puts every device id on GPU 0)
// DEV-ALIAS: exit status 1
// RUN: %exit-status %mercury-mgpu selfcheck --device-kernels-ptx %t.missing.ptx 2>&1 | FileCheck %s --check-prefix=MGPU-PTX
// MGPU-PTX: mercury-mgpu: error: cannot read --device-kernels-ptx '{{.*}}missing.ptx':
// MGPU-PTX-NOT: GPU
// MGPU-PTX: exit status 1
// RUN: %exit-status %mercury-gpu-bench --device-kernels-ptx %t.missing.ptx 2>&1 | FileCheck %s --check-prefix=BENCH-PTX
// BENCH-PTX: mercury-gpu-bench: error: cannot read --device-kernels-ptx '{{.*}}missing.ptx':
// BENCH-PTX-NOT: GPU
// BENCH-PTX: exit status 1

// mercury-gpu-bench --only: unknown and empty section names.
// RUN: %exit-status %mercury-gpu-bench --only bogus 2>&1 | FileCheck %s --check-prefix=ONLY
// ONLY: mercury-gpu-bench: error: --only: unknown section 'bogus' (P0, P1, P2, P2c, P3)
// ONLY-NOT: GPU
// ONLY: exit status 1
// RUN: %exit-status %mercury-gpu-bench --only P0,P4 2>&1 | FileCheck %s --check-prefix=ONLY-P4
// ONLY-P4: mercury-gpu-bench: error: --only: unknown section 'P4' (P0, P1, P2, P2c, P3)
// RUN: %exit-status %mercury-gpu-bench --only P0,,P1 2>&1 | FileCheck %s --check-prefix=ONLY-BLANK
// ONLY-BLANK: mercury-gpu-bench: error: --only P0,,P1: an empty section name

// mercury-fuzz refuses 0 threads, as the other tools refuse counts of 0.
// RUN: %exit-status %mercury-fuzz --threads 0 --parser 5 --schedules 0 2>&1 | FileCheck %s --check-prefix=FUZZ
// FUZZ: mercury-fuzz: error: --threads must be at least 1 (worker threads per target)
// FUZZ-NOT: execs
// FUZZ: exit status 1
