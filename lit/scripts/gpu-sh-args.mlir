// scripts/gpu.sh takes no argument (build and stage here) or --remote (run on the GPU machine).
// --help and -h print the usage (its header comment) and exit 0; any other argument is an
// error that builds nothing. Found by a new-user pass: every argument but --remote (--help, a
// typo) took the first form and started three release builds. `cargo` and `nvidia-smi` are
// fakes that fail at once here, so that not even the old script could start a build or a run.
// RUN: rm -rf %t && split-file %s %t && chmod +x %t/bin/cargo %t/bin/nvidia-smi
// RUN: %exit-status bash -c 'PATH="$0:$PATH" exec bash "$@"' %t/bin %repo/scripts/gpu.sh --remtoe 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: gpu.sh: error: unknown argument '--remtoe' (no argument: build and stage here; --remote: run on the GPU machine; --help: the usage)
// TYPO-NOT: fake
// TYPO: exit status 1
// RUN: %exit-status bash -c 'PATH="$0:$PATH" exec bash "$@"' %t/bin %repo/scripts/gpu.sh --remote extra 2>&1 | FileCheck %s --check-prefix=EXTRA
// EXTRA: gpu.sh: error: unknown argument 'extra'
// EXTRA-NOT: fake
// EXTRA: exit status 1
// RUN: %exit-status bash -c 'PATH="$0:$PATH" exec bash "$@"' %t/bin %repo/scripts/gpu.sh --remote --remote 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: gpu.sh: error: '--remote' given twice
// TWICE: exit status 1
// RUN: %exit-status bash -c 'PATH="$0:$PATH" exec bash "$@"' %t/bin %repo/scripts/gpu.sh --help 2>&1 | FileCheck %s --check-prefix=HELP
// RUN: %exit-status bash -c 'PATH="$0:$PATH" exec bash "$@"' %t/bin %repo/scripts/gpu.sh -h 2>&1 | FileCheck %s --check-prefix=HELP
// HELP: {{^}}The one GPU script: builds here, checks and times on the GPU machine, prints one table.
// HELP: {{^}}  bash scripts/gpu.sh --remote   # on the GPU machine: run every check and benchmark
// HELP-NOT: fake
// HELP-NOT: set -euo
// HELP: {{^}}exit status 0
// The valid second form is unchanged: without a GPU it says so and exits 2.
// RUN: %exit-status bash -c 'PATH="$0:$PATH" OUT="$1" exec bash "$2" --remote' %t/bin %t/out %repo/scripts/gpu.sh 2>&1 | FileCheck %s --check-prefix=REMOTE
// REMOTE: scripts/gpu.sh --remote: no GPU found (nvidia-smi -L failed); nothing to run
// REMOTE: exit status 2

//--- bin/cargo
#!/bin/sh
echo "fake cargo called: $*"
exit 1
//--- bin/nvidia-smi
#!/bin/sh
echo "fake nvidia-smi called: $*"
exit 1
