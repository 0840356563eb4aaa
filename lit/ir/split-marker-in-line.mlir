// --split-input-file splits where mlir-opt splits: a marker stands anywhere in a line, and
// what follows it on that line starts the next chunk.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file %s | FileCheck %s

// CHECK: "test.one"() : () -> ()
// CHECK: {{//}} -----
// CHECK: "test.two"() : () -> ()
"test.one"() : () -> () // -----  "test.two"() : () -> ()
