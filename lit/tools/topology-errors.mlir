// A topology file that does not parse is a located error, `file:line:col: error: not a valid
// topology file: ...` with the source line and a caret, the same from mercury-tune --topology
// and mercury-run --predict (found by a new-user pass: an empty file gave TOML's multi-line
// report ending in a bare "missing field `name`"). Errors without a place name the file.
// REQUIRES: mercury-run, mercury-tune
// RUN: rm -rf %t && mkdir -p %t && printf '' > %t/empty.toml
// RUN: printf 'name = "x"\n[device]\nname = "y"\n' > %t/partial.toml
// RUN: sed 's/^bandwidth_gbs = 450.0$/bandwidth_gbs = nan/' %repo/topologies/h100-1x4.toml > %t/nan.toml
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology %t/empty.toml --out %t/out \
// RUN:   2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/empty.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: {{^[^ ]*}}empty.toml:1:1: error: not a valid topology file: missing field `name`
// EMPTY-NOT: TOML parse error
// EMPTY: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology %t/partial.toml --out %t/out \
// RUN:   2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/partial.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=PARTIAL
// PARTIAL: {{^[^ ]*}}partial.toml:2:1: error: not a valid topology file: missing field `hbm_gb`
// PARTIAL-NEXT: {{^}}[device]
// PARTIAL-NEXT: {{^}}^
// PARTIAL: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology %t/nan.toml --out %t/out \
// RUN:   2>&1 | FileCheck %s --check-prefix=TUNE-NAN
// TUNE-NAN: mercury-tune: error: {{.*}}nan.toml: `levels[1] ('gpu').bandwidth_gbs` must be a positive number, got NaN
// TUNE-NAN: exit status 1
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/nan.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=RUN-NAN
// RUN-NAN: mercury-run: error: --predict {{.*}}nan.toml: {{.*}}nan.toml: `levels[1] ('gpu').bandwidth_gbs` must be a positive number, got NaN
// RUN-NAN: exit status 1
