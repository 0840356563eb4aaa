// Locations in every form of the LangRef (unknown, file:line:col and ranges, names, call
// sites, fusions with and without metadata, aliases used before their definition) on ops and
// on block arguments. With --mlir-print-debuginfo they print, and upstream mlir-opt reads
// them back as the same locations; upstream's own debuginfo print reads back here too.
// RUN: %mercury-opt --allow-unregistered-dialect --mlir-print-debuginfo %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo > %t.ours
// RUN: %mlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic --mlir-print-debuginfo > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mlir-opt --allow-unregistered-dialect --mlir-print-debuginfo %s | %mercury-opt --allow-unregistered-dialect --mlir-print-debuginfo | FileCheck %s

// CHECK: "test.a"() : () -> () loc("file.mlir":3:4)
"test.a"() : () -> () loc("file.mlir":3:4)
"test.b"() : () -> () loc(unknown)
"test.c"() : () -> () loc("f.mlir":1:2 to 3:4)
"test.d"() : () -> () loc("f.mlir":1:2 to :9)
"test.e"() : () -> () loc("name")
"test.f"() : () -> () loc("name"("inner.mlir":7:1))
// CHECK: loc(callsite("callee" at "caller.mlir":2:3))
"test.g"() : () -> () loc(callsite("callee" at "caller.mlir":2:3))
"test.h"() : () -> () loc(fused["a.mlir":1:1, "b"])
"test.i"() : () -> () loc(fused<"meta">["a.mlir":1:1, unknown])
// CHECK: "test.j"() : () -> () loc("aliased.mlir":10:20)
"test.j"() : () -> () loc(#later)
"test.k"() ({
// CHECK: ^bb0(%{{.*}}: i32 loc("arg.mlir":5:6)):
^bb0(%x: i32 loc("arg.mlir":5:6)):
  "test.use"(%x) : (i32) -> ()
}) : () -> ()
func.func @f(%a: i32 loc("farg.mlir":1:1)) {
  return
}
#later = loc("aliased.mlir":10:20)
