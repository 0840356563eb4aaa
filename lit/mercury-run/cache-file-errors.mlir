// --cache-file that is not a usable schedule cache entry: the reason in words, naming the
// file, exit 1 (found by a new-user pass: it printed Rust's Debug form, `Corrupt("bad.json:
// not JSON: ...")`).
// REQUIRES: mercury-run
// RUN: printf 'garbage\n' > %t.json
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --cache-file %t.json 2>&1 | FileCheck %s --check-prefix=CORRUPT
// CORRUPT: mercury-run: error: --cache-file {{.*}}.json: not a usable schedule cache entry: corrupt: {{.*}}.json: not JSON: expected value at line 1 column 1
// CORRUPT-NOT: Corrupt(
// CORRUPT: exit status 1
// RUN: printf '{"format": 999}\n' > %t.stale.json
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --cache-file %t.stale.json 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: not a usable schedule cache entry: stale: cache format 999, this compiler writes {{[0-9]+}}
// STALE-NOT: Stale(
// STALE: exit status 1
// RUN: rm -f %t.missing.json
// RUN: %exit-status %mercury-run %repo/examples/small/attention.mlir --shift-shard --backend cpu \
// RUN:   --cache-file %t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mercury-run: error: --cache-file {{.*}}missing.json: not a usable schedule cache entry: no entry (no such file)
// MISSING: exit status 1
