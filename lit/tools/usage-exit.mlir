// Every tool exits 1 on a usage error (an unknown flag, a bad value, a missing argument: bad
// input, as in mlir-opt; clap's own status would be 2) and 0 for --help and --version
// (mercury_driver::cli). Found by a new-user pass: `mercury-opt --emit=bogus` exited 2.
// REQUIRES: mercury-run, mercury-tune, mercury-mgpu, mercury-gpu-bench, mercury-study, mercury-fuzz
// RUN: %exit-status %mercury-opt --emit=bogus %s 2>&1 | FileCheck %s --check-prefix=OPT-VALUE
// OPT-VALUE: error: invalid value 'bogus' for '--emit <KIND>'
// OPT-VALUE: exit status 1
// RUN: %exit-status %mercury-opt --no-such-flag %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-opt --canonicalize=x=1 %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-opt --help | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-opt --version | FileCheck %s --check-prefix=OK
// BAD: error:
// BAD: exit status 1
// OK: exit status 0

// RUN: %exit-status %mercury-run --no-such-flag %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-run 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-run %s --iters x 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-run --help | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-tune --no-such-flag %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-tune %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-tune %s --topology h100-1x4 --out %t --backend gpu 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-tune --help | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-tune --version | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-fuzz --no-such-flag 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-fuzz --help | FileCheck %s --check-prefix=OK

// The tools that read their arguments by hand then (clap reads them now): `error: ...`, exit 1.
// RUN: %exit-status %mercury-mgpu bogus 2>&1 | FileCheck %s --check-prefix=MGPU
// MGPU: error: unrecognized subcommand 'bogus'
// MGPU: exit status 1
// RUN: %exit-status %mercury-mgpu 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %exit-status %mercury-mgpu links --reps x 2>&1 | FileCheck %s --check-prefix=BAD
// A bad argument whose message mentions a GPU is still a usage error (it exited 2).
// RUN: %exit-status %mercury-mgpu links --launcher env --ranks-per-process 1 2>&1 | FileCheck %s --check-prefix=MGPU-RANKS
// MGPU-RANKS: error: --ranks-per-process 1: at least 2 ranks per process, and at least as many per GPU
// MGPU-RANKS: exit status 1
// RUN: %exit-status %mercury-mgpu --help | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-mgpu links --help | FileCheck %s --check-prefix=OK
// RUN: %exit-status %mercury-gpu-bench --no-such-flag 2>&1 | FileCheck %s --check-prefix=GPU-BENCH
// GPU-BENCH: error: unexpected argument '--no-such-flag' found
// GPU-BENCH: exit status 1
// RUN: %exit-status %mercury-gpu-bench --reps 2>&1 | FileCheck %s --check-prefix=BAD
// A count of 0 is refused before any GPU is looked for (it was raised to 1 silently).
// RUN: %exit-status %mercury-gpu-bench --reps 0 2>&1 | FileCheck %s --check-prefix=GPU-BENCH-REPS
// GPU-BENCH-REPS: error: invalid value '0' for '--reps <N>': must be at least 1 (timed repetitions, the median reported)
// GPU-BENCH-REPS-NOT: GPU
// GPU-BENCH-REPS: exit status 1
// RUN: %exit-status %mercury-gpu-bench --ring-ranks 0 2>&1 | FileCheck %s --check-prefix=GPU-BENCH-RANKS
// GPU-BENCH-RANKS: error: invalid value '0' for '--ring-ranks <N>': must be at least 1 (virtual ranks of the ring)
// GPU-BENCH-RANKS: exit status 1
// RUN: %exit-status %mercury-gpu-bench --gemm-size 0 2>&1 | FileCheck %s --check-prefix=GPU-BENCH-GEMM
// GPU-BENCH-GEMM: error: invalid value '0' for '--gemm-size <N>': must be at least 1
// GPU-BENCH-GEMM: exit status 1
// RUN: %exit-status %mercury-gpu-bench --help | FileCheck %s --check-prefix=OK
// mercury-mgpu's counts too (they were raised to 1, --devices clamped to the visible GPUs).
// RUN: %exit-status %mercury-mgpu links --reps 0 2>&1 | FileCheck %s --check-prefix=MGPU-REPS
// MGPU-REPS: error: invalid value '0' for '--reps <N>': must be at least 1
// MGPU-REPS: exit status 1
// RUN: %exit-status %mercury-mgpu links --min-kib 0 2>&1 | FileCheck %s --check-prefix=MGPU-KIB
// MGPU-KIB: error: invalid value '0' for '--min-kib <N>': must be at least 1
// RUN: %exit-status %mercury-mgpu selfcheck --alias 0 2>&1 | FileCheck %s --check-prefix=MGPU-ALIAS
// MGPU-ALIAS: error: invalid value '0' for '--alias <K>': must be at least 1
// MGPU-ALIAS: exit status 1
// RUN: %exit-status %mercury-study --no-timng 2>&1 | FileCheck %s --check-prefix=STUDY
// STUDY: error: unexpected argument '--no-timng' found
// STUDY: exit status 1
// RUN: %exit-status %mercury-study --help | FileCheck %s --check-prefix=OK

// mercury-fuzz --save into a directory it cannot create: a usage error before any run, not
// a panic (it was an `expect`).
// RUN: rm -rf %t.file && touch %t.file
// RUN: %exit-status %mercury-fuzz --parser 1 --schedules 1 --save %t.file/sub 2>&1 | FileCheck %s --check-prefix=FUZZ-SAVE
// FUZZ-SAVE: mercury-fuzz: error: cannot create the --save directory '{{.*}}sub':
// FUZZ-SAVE-NOT: panicked
// FUZZ-SAVE: exit status 1
