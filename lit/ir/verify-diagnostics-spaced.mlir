// --verify-diagnostics reads annotations with blanks before the line designator, as upstream
// MLIR does (`expected-error *(@...)? *{{...}}`; upstream tests often write
// `expected-error @+1 {{...}}`): they are annotations, not prose, so an unmet one fails.
// RUN: rm -rf %t && split-file --leading-lines %s %t
// RUN: %mercury-opt --split-input-file --verify-diagnostics %t/met.mlir 2> %t.err
// RUN: count 0 < %t.err
// RUN: not %mercury-opt --verify-diagnostics %t/unmet.mlir 2>&1 | FileCheck %s --check-prefix=UNMET
// Upstream fails on the same file with the same message.
// RUN: not %mlir-opt --allow-unregistered-dialect --verify-diagnostics %t/unmet-generic.mlir 2>&1 | FileCheck %s --check-prefix=UNMET-GENERIC
// RUN: not %mercury-opt --allow-unregistered-dialect --verify-diagnostics %t/unmet-generic.mlir 2>&1 | FileCheck %s --check-prefix=UNMET-GENERIC
// A malformed designator is an error rather than prose (upstream would skip the line).
// RUN: not %mercury-opt --verify-diagnostics %t/malformed.mlir 2>&1 | FileCheck %s --check-prefix=MALFORMED

// UNMET: unmet.mlir:[[# @LINE + 19]]:4: error: expected error "never" was not produced
// UNMET: unmet.mlir:[[# @LINE + 20]]:4: error: expected warning "not either" was not produced
// UNMET-GENERIC: unmet-generic.mlir:[[# @LINE + 23]]:4: error: expected error "never" was not produced
// MALFORMED: malformed.mlir:[[# @LINE + 27]]:4: error: unknown line designator '@+one' in expected-{{e}}rror

//--- met.mlir
// expected-error @+1 {{'arith.addf' op requires one result}}
"arith.addf"() : () -> ()
// -----
"arith.addf"() : () -> ()
// expected-error  @above  {{'arith.addf' op requires one result}}
// -----
// expected-error @below {{'arith.addf' op requires one result}}
"arith.addf"() : () -> ()
// -----
"arith.addf"() : () -> () // expected-error@+0{{'arith.addf' op requires one result}}

//--- unmet.mlir
commir.mesh @m shape [2]
// expected-error @+1 {{never}}
commir.mesh @m2 shape [2]
// expected-warning @-1 {{not either}}

//--- unmet-generic.mlir
"t.a"() : () -> ()
// expected-error @+1 {{never}}
"t.b"() : () -> ()

//--- malformed.mlir
"arith.addf"() : () -> ()
// expected-error @+one {{x}}
