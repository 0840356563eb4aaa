// An empty module in the generic form is one empty block, `^bb0:`, as upstream MLIR prints
// it. It was `({ })`, a region of no block, which upstream refuses ("'builtin.module' op
// region #0 ('bodyRegion') failed to verify constraint: region with 1 blocks"; found by a
// fourteenth new-user pass).
// RUN: rm -rf %t && split-file --leading-lines %s %t
// RUN: %mercury-opt --mlir-print-op-generic %t/empty.mlir | FileCheck %s --check-prefix=EMPTY
// EMPTY:      "builtin.module"() ({
// EMPTY-NEXT: ^bb0:
// EMPTY-NEXT: }) : () -> ()
// RUN: %mercury-opt --mlir-print-op-generic %t/empty.mlir | %mlir-opt | %mercury-opt | FileCheck %s --check-prefix=BACK
// BACK:      module {
// BACK-NEXT: }
// RUN: %mercury-opt --mlir-print-op-generic %t/nested.mlir | FileCheck %s --check-prefix=NESTED-GENERIC
// NESTED-GENERIC:      "builtin.module"() ({
// NESTED-GENERIC-NEXT:   "builtin.module"() ({
// NESTED-GENERIC-NEXT:   ^bb0:
// NESTED-GENERIC-NEXT:   }) : () -> ()
// NESTED-GENERIC-NEXT: }) : () -> ()
// RUN: %mercury-opt --mlir-print-op-generic %t/nested.mlir | %mlir-opt | FileCheck %s --check-prefix=NESTED
// NESTED:      module {
// NESTED-NEXT:   module {
// NESTED-NEXT:   }
// NESTED-NEXT: }

//--- empty.mlir
module {
}

//--- nested.mlir
module {
  module {
  }
}
