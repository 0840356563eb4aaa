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
