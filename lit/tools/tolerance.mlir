// --tolerance takes a positive finite number in mercury-run and mercury-tune alike (one rule,
// mercury_search::profile::parse_tolerance): nan or inf would pass every check, 0 or less
// fail every one. Found by a new-user pass: mercury-tune --profile-top --tolerance nan
// "measured" every candidate, exit 0.
// REQUIRES: mercury-run, mercury-tune
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 2 --backend cpu --tolerance nan 2>&1 | FileCheck %s --check-prefix=TUNE-NAN
// TUNE-NAN: error: invalid value 'nan' for '--tolerance <TOLERANCE>': the tolerance must be a positive finite number (a relative error, e.g. 1e-3)
// TUNE-NAN: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 2 --backend cpu --tolerance inf 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 2 --backend cpu --tolerance 0 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t \
// RUN:   --profile-top 2 --backend cpu --tolerance -1 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --check --tolerance NaN 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --check --tolerance -inf 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --check --tolerance -0.5 2>&1 | FileCheck %s --check-prefix=REFUSED
// REFUSED: error: invalid value '{{.*}}' for '--tolerance <TOLERANCE>': the tolerance must be a positive finite number
// REFUSED-NOT: check @
// REFUSED: exit status 1
// RUN: %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu --check \
// RUN:   --seed 1 --tolerance 1e-3 | FileCheck %s --check-prefix=OK
// OK: check @O: relative error {{.*}} (tolerance 1e-3), largest element error {{.*}} of (rms + |want|) (at most 1e-2)  ok
