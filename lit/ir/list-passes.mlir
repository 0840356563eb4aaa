// --list-passes names every registered pass (sorted), its summary and options, and exits 0.
// RUN: %mercury-opt --list-passes | FileCheck %s
// RUN: %mercury-opt --list-passes %s | FileCheck %s
// Every listed pass is also a flag in --help.
// RUN: %mercury-opt --help | FileCheck %s --check-prefix=HELP

// CHECK: Passes
// CHECK: {{^}}  --canonicalize
// CHECK-NEXT: {{^}}      Remove unused side-effect-free operations
// CHECK: {{^}}  --symbol-dce
// CHECK-NEXT: {{^}}      Remove private symbols that are never referenced

// HELP: Passes:
// HELP-DAG: --canonicalize{{.*}}
// HELP-DAG: --symbol-dce{{.*}}
