// The tools that read their arguments by hand then (mercury-mgpu, mercury-gpu-bench,
// mercury-study; clap reads them now) and mercury-fuzz refuse bad values before any GPU is
// probed: `error: ...` (clap's words; `<tool>: error: ...` for mercury-fuzz), exit 1.
// Found by a new-user pass: these were taken as given (a rate of -1 or NaN headed for the
// topology file, --rates-gap-ms -5 clamped to 0, --only bogus ran no section and passed,
// --threads 0 ran on), ignored (`info extra`), or the last of two wins.
// REQUIRES: mercury-mgpu, mercury-gpu-bench, mercury-study, mercury-fuzz

// Patch rates given to `links` go into the topology file: the range its loader accepts.
// RUN: %exit-status %mercury-mgpu links --gemm-tflops -1 2>&1 | FileCheck %s --check-prefix=TFLOPS
// TFLOPS: error: invalid value '-1' for '--gemm-tflops <X>': must be a finite number of TFLOP/s in [1e-6, 1e6] (the range of a topology file's rates)
// TFLOPS-NOT: GPU
// TFLOPS: exit status 1
// An empty --name would be written into a file the topology loader refuses: refused first.
// RUN: %exit-status %mercury-mgpu links --name '' 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: invalid value '' for '--name <NAME>': a topology name must not be empty
// NAME: exit status 1
// RUN: %exit-status %mercury-mgpu links --attention-tflops nan 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: error: invalid value 'nan' for '--attention-tflops <X>': must be a finite number of TFLOP/s in [1e-6, 1e6]
// NAN: exit status 1
// RUN: %exit-status %mercury-mgpu links --attention-causal-tflops inf 2>&1 | FileCheck %s --check-prefix=INF
// INF: error: invalid value 'inf' for '--attention-causal-tflops <X>': must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops 0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: invalid value '0' for '--gemm-tflops <X>': must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops 2e6 2>&1 | FileCheck %s --check-prefix=HIGH
// HIGH: error: invalid value '2e6' for '--gemm-tflops <X>': must be
// RUN: %exit-status %mercury-mgpu links --gemm-tflops x 2>&1 | FileCheck %s --check-prefix=NOTNUM
// NOTNUM: error: invalid value 'x' for '--gemm-tflops <X>': invalid float literal{{$}}
// NOTNUM: exit status 1
// The measurement regime: negatives refused, not clamped to 0.
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-gap-ms -5 2>&1 | FileCheck %s --check-prefix=GAP
// GAP: error: invalid value '-5' for '--rates-gap-ms <X>': must be a finite number of milliseconds in [0, 10000]
// GAP: exit status 1
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-burst-ms -1 2>&1 | FileCheck %s --check-prefix=BURST
// BURST: error: invalid value '-1' for '--rates-burst-ms <X>': must be a finite number of milliseconds in [0, 10000]
// RUN: %exit-status %mercury-mgpu links --measure-rates --rates-warm-s nan 2>&1 | FileCheck %s --check-prefix=WARM
// WARM: error: invalid value 'nan' for '--rates-warm-s <X>': must be a finite number of seconds in [0, 3600]
// WARM: exit status 1

// `info` takes no arguments.
// RUN: %exit-status %mercury-mgpu info extra 2>&1 | FileCheck %s --check-prefix=INFO
// INFO: error: unexpected argument 'extra' found
// INFO: Usage: mercury-mgpu info{{$}}
// INFO: exit status 1

// An option given twice (mercury-opt's rule, lit/mercury-opt/repeated-option.mlir).
// RUN: %exit-status %mercury-mgpu selfcheck --devices 2 --devices 3 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: the argument '--devices <N>' cannot be used multiple times
// TWICE: exit status 1
// RUN: %exit-status %mercury-mgpu links --mib 64 --max-mib 128 2>&1 | FileCheck %s --check-prefix=ALIAS-NAME
// ALIAS-NAME: error: the argument '--max-mib <N>' cannot be used multiple times
// RUN: %exit-status %mercury-mgpu links --no-nccl --no-nccl 2>&1 | FileCheck %s --check-prefix=SWITCH
// SWITCH: error: the argument '--no-nccl' cannot be used multiple times
// RUN: %exit-status %mercury-gpu-bench --reps 5 --reps 6 2>&1 | FileCheck %s --check-prefix=BENCH-TWICE
// BENCH-TWICE: error: the argument '--reps <N>' cannot be used multiple times
// BENCH-TWICE-NOT: GPU
// BENCH-TWICE: exit status 1
// RUN: %exit-status %mercury-gpu-bench --no-check --check 2>&1 | FileCheck %s --check-prefix=BENCH-CHECK
// BENCH-CHECK: error: the argument '--no-check' cannot be used with '--check'
// RUN: %exit-status %mercury-study --no-timing --no-timing 2>&1 | FileCheck %s --check-prefix=STUDY
// STUDY: error: the argument '--no-timing' cannot be used multiple times
// STUDY: exit status 1

// selfcheck: --devices and --alias exclude each other (--devices was ignored), and an
// unreadable --device-kernels-ptx is said before the GPU, as a usage error.
// RUN: %exit-status %mercury-mgpu selfcheck --devices 2 --alias 3 2>&1 | FileCheck %s --check-prefix=DEV-ALIAS
// DEV-ALIAS: error: the argument '--devices <N>' cannot be used with '--alias <K>'
// DEV-ALIAS: exit status 1
// RUN: %exit-status %mercury-mgpu selfcheck --device-kernels-ptx %t.missing.ptx 2>&1 | FileCheck %s --check-prefix=MGPU-PTX
// MGPU-PTX: error: cannot read --device-kernels-ptx '{{.*}}missing.ptx':
// MGPU-PTX-NOT: GPU
// MGPU-PTX: exit status 1
// RUN: %exit-status %mercury-gpu-bench --device-kernels-ptx %t.missing.ptx 2>&1 | FileCheck %s --check-prefix=BENCH-PTX
// BENCH-PTX: error: cannot read --device-kernels-ptx '{{.*}}missing.ptx':
// BENCH-PTX-NOT: GPU
// BENCH-PTX: exit status 1

// mercury-gpu-bench --only: unknown and empty section names.
// RUN: %exit-status %mercury-gpu-bench --only bogus 2>&1 | FileCheck %s --check-prefix=ONLY
// ONLY: error: invalid value 'bogus' for '--only <SECTIONS>'
// ONLY-NEXT: [possible values: P0, P1, P2, P2c, P2b, P3]
// ONLY-NOT: GPU
// ONLY: exit status 1
// RUN: %exit-status %mercury-gpu-bench --only P0,P4 2>&1 | FileCheck %s --check-prefix=ONLY-P4
// ONLY-P4: error: invalid value 'P4' for '--only <SECTIONS>'
// RUN: %exit-status %mercury-gpu-bench --only P0,,P1 2>&1 | FileCheck %s --check-prefix=ONLY-BLANK
// ONLY-BLANK: error: a value is required for '--only <SECTIONS>' but none was supplied

// mercury-fuzz refuses 0 threads, as the other tools refuse counts of 0.
// RUN: %exit-status %mercury-fuzz --threads 0 --parser 5 --schedules 0 2>&1 | FileCheck %s --check-prefix=FUZZ
// FUZZ: mercury-fuzz: error: --threads must be at least 1 (worker threads per target)
// FUZZ-NOT: execs
// FUZZ: exit status 1
