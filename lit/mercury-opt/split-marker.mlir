// mlir-opt's `--split-input-file=MARKER` and `--output-split-marker=MARKER` (both were
// refused: "unexpected value"); `--split-input-file` alone splits at `// -----`, and an
// empty marker splits nothing. `--verify-each` takes LLVM's boolean spellings (0 and 1 were
// refused).
// RUN: %mercury-opt --allow-unregistered-dialect %s --split-input-file=';; cut' --output-split-marker='// ##' | FileCheck %s
// CHECK: "a.first"
// CHECK-NEXT: }
// CHECK-NEXT: // ##
// CHECK-NEXT: module {
// CHECK-NEXT: "a.second"
// CHECK-NOT: // -----
// RUN: %mercury-opt --allow-unregistered-dialect %s --split-input-file=';; cut' --verify-each=0 | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: "a.first"
// DEFAULT: // -----
// DEFAULT: "a.second"
// RUN: not %mercury-opt --allow-unregistered-dialect %s --split-input-file= 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: split-marker.mlir:{{[0-9]+}}:1: error: expected {{.*}}found ';'
// RUN: not %mercury-opt --allow-unregistered-dialect %s --verify-each=yes 2>&1 | FileCheck %s --check-prefix=BOOL
// BOOL: 'yes' is invalid value for boolean argument! Try 0 or 1
"a.first"() : () -> ()
;; cut
"a.second"() : () -> ()
