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
// TOML:{{[^ ]*}}.gemm.toml:2:5: error: [gemm] m (63) must be a multiple of 8: examples/ag_gemm.mlir, which the description is written into, splits dimension 0 of '@A' (@m) into 8 shards, one per device of the topology
// TOML-NEXT:m = 63
// TOML-NEXT:    ^
// TOML-NEXT:exit status 1
// A description declares no mesh: it is written for the topology's devices. m = 12 on 4
// devices is taken (it was refused as "a multiple of 8", the example's own mesh), and m = 8 on
// 16 is refused at the value (it passed, and every candidate then failed in one long message).
// RUN: printf '[gemm]\nm = 12\nn = 32\nk = 64\n' > %t.m12.toml
// RUN: rm -rf %t.four && %mercury-tune %t.m12.toml --topology h100-1x4 --out %t.four 2>&1 | FileCheck %s --check-prefix=FOUR
// FOUR: chosen:
// RUN: FileCheck %s --check-prefix=FOUR-OP < %t.four/operator.mlir
// FOUR-OP: commir.mesh @mesh shape [4]
// RUN: printf '[gemm]\nm = 8\nn = 32\nk = 64\n' > %t.m8.toml
// RUN: %exit-status %mercury-tune %t.m8.toml --topology h100-2x8 --out %t 2>&1 | FileCheck %s --check-prefix=SIXTEEN
// SIXTEEN: {{[^ ]*}}.m8.toml:2:5: error: [gemm] m (8) must be a multiple of 16: {{.*}} into 16 shards, one per device of the topology
// SIXTEEN: exit status 1
// On 3 devices, where the example's own extents do not divide, the value is still the place
// (it was located in the generated text: the check parsed the example with its own extents).
// RUN: printf '[gemm]\nm = 4098\nn = 4096\nk = 4096\n' > %t.m4098.toml
// RUN: %exit-status %mercury-tune %t.m4098.toml --topology %S/Inputs/three-gpus.toml --out %t 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: {{[^ ]*}}.m4098.toml:3:5: error: [gemm] n (4096) must be a multiple of 3: {{.*}} into 3 shards, one per device of the topology
// THREE: exit status 1
// RUN: printf 'commir.kernel\n' > %t.mlir
// RUN: %exit-status %mercury-tune %t.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: {{^}}{{[^ ]*}}.mlir:1:14: error: expected attribute 'sym_name'
// PARSE-NEXT: {{^}}commir.kernel
// PARSE: exit status 1
// RUN: %exit-status %mercury-tune %t.missing.mlir --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=UNLOCATED
// UNLOCATED: mercury-tune: error: cannot read '{{.*}}missing.mlir':
// UNLOCATED: exit status 1
// Plans given as JSON: every error is located in the file (it was `mercury-tune: error:
// t.json: item 0 is not a plan: ...` without a place), and a region whose offsets and extents
// differ in number is refused where it is read (the plan verifier zipped the two and indexed
// past the shorter one: a panic, found by a new-user pass on 2026-12-03).
// RUN: printf '[{"name": 3}]\n' > %t.type.json
// RUN: %exit-status %mercury-tune %t.type.json --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=JTYPE --match-full-lines
// JTYPE:{{[^ ]*}}.type.json:1:11: error: item 0 is not a plan: invalid type: integer `3`, expected a string
// JTYPE-NEXT:[{"name": 3}]
// JTYPE-NEXT:          ^
// JTYPE-NEXT:exit status 1
// RUN: printf '[\n' > %t.eof.json
// RUN: %exit-status %mercury-tune %t.eof.json --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=JEOF
// JEOF: {{[^ ]*}}.eof.json:2:1: error: not valid JSON: EOF while parsing a list
// JEOF: exit status 1
// RUN: %mercury-opt %S/../lowering/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --emit=plan > %t.plan.json
// RUN: %mercury-tune %t.plan.json --topology h100-1x4 --out %t.ok > /dev/null
// RUN: python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["ranks"][1]["outputs"][0]["region"]; r["offset"]=r["offset"][:1]; json.dump(d, open(sys.argv[2], "w"), indent=1)' %t.plan.json %t.short.json
// RUN: %exit-status %mercury-tune %t.short.json --topology h100-1x4 --out %t 2>&1 | FileCheck %s --check-prefix=JREGION
// JREGION: {{[^ ]*}}.short.json:{{[0-9]+}}:{{[0-9]+}}: error: item 0 is not a plan: region with 1 offsets and 2 extents (one of each per dimension)
// JREGION: exit status 1
