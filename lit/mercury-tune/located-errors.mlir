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
// An operator description (.toml) whose extent the example it is written into cannot take is
// located at that value, saying what must divide what (it was located in the generated
// example text, examples/ag_gemm.mlir [m=63 n=32 k=64]:10:3).
// RUN: printf '[gemm]\nm = 63\nn = 32\nk = 64\n' > %t.gemm.toml
// RUN: %exit-status %mercury-tune %t.gemm.toml --topology h100-1x8 --out %t 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TOML --match-full-lines --strict-whitespace
// TOML:{{[^ ]*}}.gemm.toml:2:5: error: [gemm] m (63) must be a multiple of 8: examples/ag_gemm.mlir, which the description is written into, splits dimension 0 of '@A' (@m) into 8 shards, one per device of its mesh '@mesh'
// TOML-NEXT:m = 63
// TOML-NEXT:    ^
// TOML-NEXT:exit status 1
// RUN: printf 'commir.kernel\n' > %t.mlir
// RUN: %exit-status %mercury-tune %t.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: {{^}}{{[^ ]*}}.mlir:1:14: error: expected attribute 'sym_name'
// PARSE-NEXT: {{^}}commir.kernel
// PARSE: exit status 1
// RUN: %exit-status %mercury-tune %t.missing.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=UNLOCATED
// UNLOCATED: mercury-tune: error: cannot read '{{.*}}missing.mlir':
// UNLOCATED: exit status 1
