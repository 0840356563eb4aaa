// mlir-opt's `--split-input-file=MARKER` and `--output-split-marker=MARKER` (both were
// refused: "unexpected value"); `--split-input-file` alone splits at `//` and five dashes, and so does
// an empty marker, `--split-input-file=`, as in mlir-opt 22 (it split nothing: the chunks of
// a file became one module). `--verify-each` takes LLVM's boolean spellings (0 and 1 were
// refused). (The markers are spelled in two quoted pieces on the RUN lines, which would
// otherwise split there: a marker splits wherever it stands, as in mlir-opt.)
// RUN: %mercury-opt --allow-unregistered-dialect %s --split-input-file=';; c''ut' --output-split-marker='// ##' | FileCheck %s
// CHECK: "a.first"
// CHECK-NEXT: }
// CHECK-NEXT: // ##
// CHECK-NEXT: module {
// CHECK-NEXT: "a.second"
// CHECK-NOT: {{//}} -----
// RUN: %mercury-opt --allow-unregistered-dialect %s --split-input-file=';; c''ut' --verify-each=0 | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: "a.first"
// DEFAULT: {{//}} -----
// DEFAULT: "a.second"
// RUN: not %mercury-opt --allow-unregistered-dialect %s --split-input-file= 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: split-marker.mlir:{{[0-9]+}}:1: error: unexpected character
// RUN: %mercury-opt --allow-unregistered-dialect %S/Inputs/two-chunks.mlir --split-input-file= | FileCheck %s --check-prefix=EMPTY-DEFAULT
// EMPTY-DEFAULT: module {
// EMPTY-DEFAULT-NEXT: "a.x"() : () -> ()
// EMPTY-DEFAULT-NEXT: }
// EMPTY-DEFAULT-NEXT: {{//}} -----
// EMPTY-DEFAULT-NEXT: module {
// EMPTY-DEFAULT-NEXT: "a.y"() : () -> ()
// A chunk that fails prints nothing but keeps its markers, as mlir-opt: the n-th output stays
// after the (n-1)-th marker (a failed first chunk shifted the later outputs by one marker).
// RUN: printf '"a.x"() : () -> ()\n\057\057 -----\n"bad\n\057\057 -----\n"a.y"() : () -> ()\n' > %t.three.mlir
// RUN: not %mercury-opt --allow-unregistered-dialect %t.three.mlir --split-input-file 2>/dev/null | FileCheck %s --check-prefix=FAILED-CHUNK
// FAILED-CHUNK: "a.x"
// FAILED-CHUNK-NEXT: }
// FAILED-CHUNK-NEXT: {{//}} -----
// FAILED-CHUNK-NEXT: {{//}} -----
// FAILED-CHUNK-NEXT: module {
// FAILED-CHUNK-NEXT: "a.y"
// RUN: not %mercury-opt --allow-unregistered-dialect %s --verify-each=yes 2>&1 | FileCheck %s --check-prefix=BOOL
// BOOL: 'yes' is invalid value for boolean argument! Try 0 or 1
"a.first"() : () -> ()
;; cut
"a.second"() : () -> ()
