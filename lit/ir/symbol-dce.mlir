// --symbol-dce removes private symbols that nothing references, until nothing changes; public
// symbols and referenced private ones stay.
// RUN: %mercury-opt --allow-unregistered-dialect --symbol-dce %s | FileCheck %s
// RUN: %mercury-opt --allow-unregistered-dialect --symbol-dce %s | %mercury-opt --allow-unregistered-dialect --symbol-dce | FileCheck %s

// CHECK-LABEL: module {
// CHECK-DAG: func.func @public
// CHECK-DAG: func.func private @used
// CHECK-DAG: func.func private @nested_used
// CHECK-NOT: func.func private @dead
// CHECK-NOT: @only_used_by_dead
// CHECK-NOT: @nested_dead
module {
  "func.func"() ({
    "test.call"() {callee = @used, nested = @inner::@nested_used} : () -> ()
    func.return
  }) {sym_name = "public", function_type = () -> ()} : () -> ()
  "func.func"() ({
    func.return
  }) {sym_name = "used", sym_visibility = "private", function_type = () -> ()} : () -> ()
  "func.func"() ({
    "test.call"() {callee = @only_used_by_dead} : () -> ()
    func.return
  }) {sym_name = "dead", sym_visibility = "private", function_type = () -> ()} : () -> ()
  "func.func"() ({
    func.return
  }) {sym_name = "only_used_by_dead", sym_visibility = "private", function_type = () -> ()} : () -> ()
  module @inner {
    "func.func"() ({
      func.return
    }) {sym_name = "nested_used", sym_visibility = "private", function_type = () -> ()} : () -> ()
    "func.func"() ({
      func.return
    }) {sym_name = "nested_dead", sym_visibility = "private", function_type = () -> ()} : () -> ()
  }
}
