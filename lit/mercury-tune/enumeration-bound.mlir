// The search's enumeration is bounded (new-user pass 5b): re-factoring the mesh of 512
// devices enumerated 8.4 million candidates and ran out of memory silently; 64 devices grew to
// 23 GB. Meshes of more levels than mercury_search::commir_source::ENUMERATION_BUDGET allows
// are left out, and the run says how many and how to ask for them (--max-mesh-levels).
// REQUIRES: mercury-tune
//
// 512 devices: meshes of one level only; every one refused, and the error says so, counted
// per reason with one example each, and what was not tried.
// RUN: %exit-status %mercury-tune %S/../../examples/attention.mlir --refactor-mesh \
// RUN:   --topology %S/Inputs/flat512.toml --out %t.512 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: mercury-tune: error: no usable schedule for {{.*}} on flat512: the source produced no candidate: 5 refused, 3 distinct reason(s):
// BIG-NEXT:   2 x tile: blocks of N along '@i' are below its minimum block N
// BIG-NEXT:       e.g. mesh 512 ["ring"]: tile: blocks of 64 along '@i' are below its minimum block 128
// BIG:   meshes of more than 1 level(s) were not tried (the search enumerates at most 4194304 candidates x devices^2, here 512 devices): 8398075 candidate(s) on 255 mesh shape(s) left out, e.g. 2x2x2x2x2x2x2x2x2; --max-mesh-levels N tries meshes of up to N levels
// BIG-NEXT: exit status 2
//
// A bound asked for is said too, as a warning of a run that succeeds.
// RUN: rm -rf %t.one && %mercury-tune %S/Inputs/attention-naive-small.mlir --refactor-mesh \
// RUN:   --max-mesh-levels 1 --topology h100-1x8 --out %t.one 2>&1 | FileCheck %s --check-prefix=ASKED
// ASKED: warning: meshes of more than 1 level(s) were not tried (as asked): {{[0-9]+}} candidate(s) on 3 mesh shape(s) left out, e.g. 2x2x2; --max-mesh-levels N tries meshes of up to N levels
// ASKED: chosen: mesh 8:
// RUN: FileCheck %s --check-prefix=ASKED-MD < %t.one/tuning-report.md
// ASKED-MD: - warning: meshes of more than 1 level(s) were not tried (as asked)
//
// The option bounds re-factored meshes only, and is at least 1.
// RUN: %exit-status %mercury-tune %S/Inputs/attention-naive-small.mlir --max-mesh-levels 2 \
// RUN:   --topology h100-1x8 --out %t.x 2>&1 | FileCheck %s --check-prefix=DECLARED
// DECLARED: mercury-tune: error: --max-mesh-levels 2: without --refactor-mesh the search keeps the operator's declared mesh; add --refactor-mesh to enumerate meshes of up to 2 levels
// DECLARED-NEXT: exit status 1
// RUN: echo '[]' > %t.json
// RUN: %exit-status %mercury-tune %t.json --max-mesh-levels 2 --topology h100-1x8 --out %t.x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=JSON
// JSON: mercury-tune: error: --max-mesh-levels 2: '{{.*}}.json' gives plans, their meshes are set; the option bounds the meshes the CommIR generator enumerates (.toml, or .mlir with --refactor-mesh)
// JSON-NEXT: exit status 1
// RUN: %exit-status %mercury-tune %t.json --max-mesh-levels 0 --topology h100-1x8 --out %t.x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO
// ZERO: error: invalid value '0' for '--max-mesh-levels <N>'
// ZERO: exit status
//
// Up to 16 devices nothing is left out (their results are those of the unbounded search).
// RUN: rm -rf %t.16 && %mercury-tune %S/Inputs/attention-naive-small.mlir --refactor-mesh \
// RUN:   --topology h100-4x4 --out %t.16 2>&1 | FileCheck %s --check-prefix=SIXTEEN
// SIXTEEN-NOT: not tried
// SIXTEEN: searched:
