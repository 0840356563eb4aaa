// A located error in the operator comes out as mercury-opt prints it, `file:line:col: error:`
// with the source line and a caret, without mercury-tune's own prefix (found by a new-user
// pass: `mercury-tune: error: ta8b.mlir:9:3: error: ...`). Errors without a place keep
// `mercury-tune: error:`.
// REQUIRES: mercury-tune
// RUN: %exit-status %mercury-tune %S/Inputs/indivisible-shard.mlir --topology h100-1x4 --out %t \
// RUN:   2>&1 | FileCheck %s --check-prefix=VERIFY --match-full-lines --strict-whitespace
// RUN: %exit-status %mercury-tune %S/Inputs/indivisible-shard.mlir --topology h100-1x4 --out %t \
// RUN:   --profile-top 1 --backend cpu 2>&1 | FileCheck %s --check-prefix=VERIFY --match-full-lines --strict-whitespace
// VERIFY:{{[^ ]*}}indivisible-shard.mlir:11:3: error: dimension 0 of '@Q' (size 2) does not divide into 8 shards
// VERIFY-NEXT:  commir.buffer @Q : [@b, @hk * @g, @i, 4] f32 in sharding [S(0), R, R, R]
// VERIFY-NEXT:  ^
// VERIFY-NEXT:exit status 1
// RUN: printf 'commir.kernel\n' > %t.mlir
// RUN: %exit-status %mercury-tune %t.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: {{^}}{{[^ ]*}}.mlir:1:14: error: expected attribute 'sym_name'
// PARSE-NEXT: {{^}}commir.kernel
// PARSE: exit status 1
// RUN: %exit-status %mercury-tune %t.missing.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=UNLOCATED
// UNLOCATED: mercury-tune: error: cannot read '{{.*}}missing.mlir':
// UNLOCATED: exit status 1
