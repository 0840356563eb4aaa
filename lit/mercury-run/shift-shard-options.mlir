// mercury-run's --shift-shard takes the pass's options as mercury-opt's does (one flag form and
// one option reader for both, mercury_driver::cli): `--shift-shard="balance=false"`. It took no
// value, so a causal operator could not be run without its zigzag placements (a new-user run).
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/attention_causal.mlir --shift-shard --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=BALANCED
// BALANCED: permute p2p (reshard)
// RUN: %mercury-run %repo/examples/attention_causal.mlir --shift-shard="balance=false" --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// UNBALANCED: @K: ring p2p
// UNBALANCED-NOT: permute
// The same refusals as mercury-opt's, in the same words.
// RUN: %exit-status %mercury-run %repo/examples/attention_causal.mlir --shift-shard="balnce=false" --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: %exit-status %mercury-opt %repo/examples/attention_causal.mlir --shift-shard="balnce=false" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: pass 'shift-shard' has no option 'balnce'; did you mean 'balance'? (options: axis, balance, kernel)
// UNKNOWN: exit status 1
// RUN: %exit-status %mercury-run %repo/examples/attention_causal.mlir --shift-shard="balance=false}" --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: mercury-run: error: bad options for --shift-shard: expected ',' after pass 'shift-shard', found '}'
// SYNTAX: exit status 1
// The options need `=`: a following word is not read as them.
// RUN: %exit-status %mercury-run %repo/examples/attention_causal.mlir --shift-shard "balance=false" --backend cpu --no-run 2>&1 | FileCheck %s --check-prefix=SPACE
// SPACE: error: unexpected argument 'balance=false' found
// SPACE: exit status 1
