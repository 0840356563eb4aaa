// mercury-tune --out rewrites the directory's outputs: files only some runs write (an earlier
// .toml run's operator.mlir, an earlier profiled run's profile.json) are removed, not left to
// describe another run (a new-user pass ran `mercury-run DIR/operator.mlir --schedule
// DIR/schedule.transform` on a stale operator). A --cache that is a file is refused, and an
// entry that cannot be written is said (it was silent, exit 0, naming the unwritten file).
// REQUIRES: mercury-tune
// RUN: rm -rf %t && mkdir -p %t/out && echo stale > %t/out/operator.mlir && echo stale > %t/out/profile.json
// RUN: %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t/out > %t/log
// RUN: not test -e %t/out/operator.mlir
// RUN: not test -e %t/out/profile.json
// RUN: test -e %t/out/schedule.transform
// RUN: touch %t/file
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t/o2 --cache %t/file 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: mercury-tune: error: --cache: '{{.*}}file' is not a directory
// FILE: exit status 1
// RUN: %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t/o3 --cache %t/file/sub 2>&1 | FileCheck %s --check-prefix=WRITE
// WRITE: warning: could not write the schedule cache entry {{.*}}file/sub/{{[0-9a-f]+}}.json
// WRITE-NOT: cache: {{.*}}.json (mercury-run
