// A topology file that does not parse is a located error, `file:line:col: error: not a valid
// topology file: ...` with the source line and a caret, the same from mercury-tune --topology
// and mercury-run --predict (found by a new-user pass: an empty file gave TOML's multi-line
// report ending in a bare "missing field `name`"). A value the checks refuse is located at
// the value, the same way (it was `mercury-tune: error: t.toml: ...`, with no line).
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
// RUN:   2>&1 | FileCheck %s --check-prefix=NAN
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/nan.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=NAN
// NAN: {{^[^ ]*}}nan.toml:36:17: error: `levels[1] ('gpu').bandwidth_gbs` must be a positive number, got NaN
// NAN-NEXT: {{^}}bandwidth_gbs = nan{{$}}
// NAN-NEXT: {{^                \^$}}
// NAN-NOT: mercury-
// NAN: exit status 1

// More values the checks refuse, each at its value (h100-2x4 edited).
// RUN: sed 's/^size = 4$/size = 0/' %repo/topologies/h100-2x4.toml > %t/size.toml
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology %t/size.toml --out %t/out \
// RUN:   2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: {{^[^ ]*}}size.toml:34:8: error: levels[1] ('gpu'): `size` must be at least 1
// SIZE-NEXT: {{^}}size = 0{{$}}
// SIZE: exit status 1
// RUN: sed 's/^ports = 1$/ports = 3/' %repo/topologies/h100-2x4.toml > %t/ports.toml
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/ports.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=PORTS
// PORTS: {{^[^ ]*}}ports.toml:30:9: error: levels[0] ('node'): `ports` = 3 must divide the 4 device(s) of one unit
// PORTS: exit status 1
// Two levels of one name: the second, with a note at the first.
// RUN: sed 's/^name = "gpu"$/name = "node"/' %repo/topologies/h100-2x4.toml > %t/dup.toml
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology %t/dup.toml --out %t/out \
// RUN:   2>&1 | FileCheck %s --check-prefix=DUP
// DUP: {{^[^ ]*}}dup.toml:33:8: error: levels[1] ('node'): duplicate level name
// DUP: {{^[^ ]*}}dup.toml:24:8: note: levels[0] has the name 'node'
// DUP: exit status 1
// Levels out of order: at the faster level's bandwidth, the next level in a note.
// RUN: sed 's/^bandwidth_gbs = 12.5$/bandwidth_gbs = 4500.0/' %repo/topologies/h100-2x4.toml > %t/order.toml
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --no-run --predict %t/order.toml \
// RUN:   2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: {{^[^ ]*}}order.toml:27:17: error: levels must be ordered slowest first, but 'node' (4050 GB/s) is faster than 'gpu' (369 GB/s)
// ORDER: {{^[^ ]*}}order.toml:36:17: note: the next level, 'gpu'
// ORDER: exit status 1
