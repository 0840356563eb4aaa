// scripts/sim_compare.sh refuses a BIN_DIR that is not a directory or lacks an executable
// mercury-run or mercury-tune, before any case runs; --help and -h print its header comment.
// sim_compare.py refuses a directory in which a case did not run (exit 127: command not found,
// 126: not executable) or that holds no case at all. Found by a new-user pass: a mistyped
// BIN_DIR recorded 1298 cases of `exit 127` and exited 0, and sim_compare.py then reported
// the two directories identical.
// RUN: rm -rf %t && split-file %s %t && chmod +x %t/bin/mercury-run
// RUN: %exit-status bash %repo/scripts/sim_compare.sh %t/no-such-dir %t/out 2>&1 | FileCheck %s --check-prefix=NODIR
// NODIR: sim_compare.sh: error: BIN_DIR '{{.*}}no-such-dir' is not a directory
// NODIR-NEXT: usage: sim_compare.sh BIN_DIR OUT_DIR, or sim_compare.sh --inputs OUT_DIR (--help: more)
// NODIR-NEXT: exit status 1
// RUN: not ls %t/out
// RUN: %exit-status bash %repo/scripts/sim_compare.sh %t/bin %t/out 2>&1 | FileCheck %s --check-prefix=NOTUNE
// NOTUNE: sim_compare.sh: error: BIN_DIR '{{.*}}bin' has no executable mercury-tune
// NOTUNE-NOT: fake
// NOTUNE: exit status 1
// RUN: %exit-status bash %repo/scripts/sim_compare.sh %t/in-dir %t/out 2>&1 | FileCheck %s --check-prefix=EMPTYBIN
// EMPTYBIN: sim_compare.sh: error: BIN_DIR '{{.*}}in-dir' has no executable mercury-run
// RUN: %exit-status bash %repo/scripts/sim_compare.sh %t/bin 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: sim_compare.sh: error: 2 arguments expected, 1 given
// ONE: exit status 1
// RUN: %exit-status bash %repo/scripts/sim_compare.sh --input %t/out 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: sim_compare.sh: error: unknown option '--input'
// OPTION: exit status 1
// RUN: %exit-status bash %repo/scripts/sim_compare.sh --help 2>&1 | FileCheck %s --check-prefix=HELP
// RUN: %exit-status bash %repo/scripts/sim_compare.sh -h 2>&1 | FileCheck %s --check-prefix=HELP
// HELP: {{^}}Records what the cost model predicts for many plans
// HELP: {{^}}  bash scripts/sim_compare.sh BIN_DIR OUT_DIR
// HELP-NOT: sim_compare.sh: error
// HELP-NOT: set -uo
// HELP: {{^}}exit status 0
// RUN: not ls %t/out

// sim_compare.py: cases that did not run are refused, also when both sides agree.
// RUN: %exit-status %python %repo/scripts/sim_compare.py %t/not-run %t/not-run 2>&1 | FileCheck %s --check-prefix=PY127
// PY127: sim_compare.py: error: {{.*}}not-run: 2 of 3 cases did not run (exit 127: command not found, or 126: not executable), the first a.err.out; was sim_compare.sh given the right BIN_DIR?
// PY127-NOT: identical
// PY127: exit status 1
// RUN: %exit-status %python %repo/scripts/sim_compare.py %t/ran %t/no-such-dir 2>&1 | FileCheck %s --check-prefix=PYDIR
// PYDIR: sim_compare.py: error: {{.*}}no-such-dir: not a directory
// PYDIR: exit status 1
// RUN: %exit-status %python %repo/scripts/sim_compare.py %t/in-dir %t/ran 2>&1 | FileCheck %s --check-prefix=PYEMPTY
// PYEMPTY: sim_compare.py: error: {{.*}}in-dir: no case outputs (CASE.out ending in 'exit N'): not written by sim_compare.sh
// PYEMPTY: exit status 1
// Cases that ran (a refusal, exit 1, is a case that must fail alike) still compare.
// RUN: %exit-status %python %repo/scripts/sim_compare.py %t/ran %t/ran 2>&1 | FileCheck %s --check-prefix=PYOK
// PYOK: 2 files compared: 2 identical (but for paths and search times), 0 not
// PYOK: exit status 0

//--- bin/mercury-run
#!/bin/sh
echo "fake mercury-run called: $*"
exit 1
//--- in-dir/notes.md
Not a case.
//--- not-run/a.err.out
sim_compare.sh: line 110: /mercury-run: No such file or directory
exit 127
//--- not-run/b@h100-1x8.out
sim_compare.sh: line 110: /mercury-run: No such file or directory
exit 127
//--- not-run/c@h100-1x8.out
// comm-plan @k: mesh [4], 4 ranks, 1 stages
exit 0
//--- ran/a.err.out
mercury-run: error: the schedule does not fit
exit 1
//--- ran/b@h100-1x8.out
// comm-plan @k: mesh [4], 4 ranks, 1 stages
exit 0
