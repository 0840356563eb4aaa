// mercury-tune --profile-top on the CPU executor (the measuring backend of the tests) caches
// the measured pick with its time; mercury-run --cache-file compares a later run of that
// schedule with it and marks the entry suspect when the run is more than 20% slower.
// REQUIRES: mercury-run, mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t/out \
// RUN:   --cache %t/cache --profile-top 2 --backend cpu --iters 1 | FileCheck %s --check-prefix=TUNE
// TUNE: chosen:    mesh 8: {{.*}} measured {{[0-9.]+ (us|ms|s)}}
// TUNE: schedule:  {{known template|new schedule}}
// TUNE: profile:   cpu (f64 reference executor; times are not GPU times)
// TUNE-NEXT: model #1
// TUNE-NEXT: model #2
// TUNE-NEXT: model pick {{.*}} | measured pick {{.*}} | within 5%: {{.*}} | Kendall tau {{.*}} | CPU-seconds (no GPU used)
// TUNE: cache:     {{.*}}.json (mercury-run --cache-file

// A cached time no run can reach: the run is far more than 20% slower, the entry is marked.
// RUN: %python %S/Inputs/cache_time.py %t/cache 1e-12 %t/fast.json
// RUN: %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/fast.json | FileCheck %s --check-prefix=SUSPECT
// SUSPECT: cache: schedule is SUSPECT (measured {{.*}} now against 1.000e-12 s when cached ({{.*}}%, limit +20%)); marked in
// RUN: %python %S/Inputs/cache_time.py --show %t/fast.json | FileCheck %s --check-prefix=MARKED
// MARKED: measured 1e-12 suspect measured {{.*}} limit +20%)

// A cached time every run beats: not suspect.
// RUN: %python %S/Inputs/cache_time.py %t/cache 1e6 %t/slow.json
// RUN: %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/slow.json | FileCheck %s --check-prefix=OK
// OK: cache: within 20% of the cached measured time
// RUN: %python %S/Inputs/cache_time.py --show %t/slow.json | FileCheck %s --check-prefix=CLEAN
// CLEAN: measured 1000000.0 suspect None

// Another schedule than the cached one: refused, nothing compared.
// RUN: not %mercury-run %repo/examples/small/attention.mlir --pass-pipeline='builtin.module(single-device)' \
// RUN:   --backend cpu --cache-file %t/slow.json 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: --cache-file {{.*}}slow.json: its schedule '{{.*}}' is not the one compiled here

// An entry measured on another device: its time says nothing about this run's, so nothing is
// compared and nothing is marked (an eleventh new-user pass: a CPU run marked a GPU-measured
// entry suspect, +452937%, and the next mercury-tune discarded it).
// RUN: %python %S/Inputs/cache_time.py %t/cache 6.3e-5 %t/gpu.json "NVIDIA H200"
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/gpu.json 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: mercury-run: error: --cache-file {{.*}}gpu.json: the entry's schedule was measured on 'NVIDIA H200', this run is on 'cpu reference executor': its time says nothing about this run's
// DEVICE: exit status 1
// RUN: %python %S/Inputs/cache_time.py --show %t/gpu.json | FileCheck %s --check-prefix=UNMARKED
// UNMARKED: measured 6.3e-05 suspect None

// A cached time that is no time (negative, 0, huge) makes the entry corrupt, not a hit.
// RUN: %python %S/Inputs/cache_time.py %t/cache -1 %t/neg.json
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/neg.json 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: not a usable schedule cache entry: corrupt: {{.*}}neg.json: the measured time -1e0 s of '{{.*}}' is not a time (a finite number of seconds above 0 and at most 1e6)
// NEG: exit status 1
// RUN: %python %S/Inputs/cache_time.py %t/cache 1e308 %t/huge.json
// RUN: not %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/huge.json 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: the measured time 1e308 s of '{{.*}}' is not a time

// A format that is not a number is named as such, not as missing.
// RUN: sed 's/"format":1,/"format":"1",/' %t/slow.json > %t/fmt.json
// RUN: not %mercury-run %repo/examples/small/attention.mlir --schedule %t/out/schedule.transform \
// RUN:   --backend cpu --cache-file %t/fmt.json 2>&1 | FileCheck %s --check-prefix=FMT
// FMT: corrupt: {{.*}}fmt.json: format "1" is not a format number (this compiler writes 1)
