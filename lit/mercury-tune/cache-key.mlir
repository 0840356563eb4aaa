// The schedule cache keys an entry by the whole operator as the search reads it (mesh, levels,
// placements, body) and by what bounds its candidates (the declared mesh kept or re-factored):
// a different operator of the same shapes must miss. Found by a new-user pass: the key held
// only which buffer dimensions were sharded, so examples/attention_2x4.mlir got the flat-8
// entry of examples/attention.mlir (a transform its mesh refuses), the zigzag causal operator
// got the contiguous one's (which delivers O contiguous), and --refactor-mesh got the declared
// mesh's pick.
// REQUIRES: mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %repo/examples/attention.mlir --topology h100-2x4 --cache %t/c --out %t/a | FileCheck %s --check-prefix=FIRST
// FIRST: cache miss
// RUN: %mercury-tune %repo/examples/attention.mlir --topology h100-2x4 --cache %t/c --out %t/a2 | FileCheck %s --check-prefix=AGAIN
// AGAIN: chosen: {{.*}}(cache)
// RUN: %mercury-tune %repo/examples/attention_2x4.mlir --topology h100-2x4 --cache %t/c --out %t/b | FileCheck %s --check-prefix=MESH
// MESH: chosen:    mesh 2x4:
// MESH: cache miss
// RUN: %mercury-tune %repo/examples/attention.mlir --topology h100-2x4 --cache %t/c --out %t/r --refactor-mesh | FileCheck %s --check-prefix=REFACTOR
// REFACTOR: cache miss
// RUN: %mercury-tune %repo/examples/attention_causal.mlir --topology h200-1x8 --cache %t/z --out %t/c1 | FileCheck %s --check-prefix=FIRST
// RUN: %mercury-tune %repo/examples/attention_causal_zigzag.mlir --topology h200-1x8 --cache %t/z --out %t/c2 | FileCheck %s --check-prefix=FIRST
// Value names are not part of the operator: the same module with its SSA values renamed hits
// the entry (it missed: the generic printer kept the names; now the key numbers the values).
// RUN: sed -e 's/%%q\b/%%query/g; s/%%o\b/%%out/g' %repo/examples/attention.mlir > %t/renamed.mlir
// RUN: %mercury-tune %t/renamed.mlir --topology h100-2x4 --cache %t/c --out %t/a3 | FileCheck %s --check-prefix=AGAIN
// A changed body still misses (the names go, the ops stay).
// RUN: sed -e 's/causal = false/causal = true/' %repo/examples/attention.mlir > %t/causal.mlir
// RUN: %mercury-tune %t/causal.mlir --topology h100-2x4 --cache %t/c --out %t/a4 | FileCheck %s --check-prefix=FIRST
