// Structural rules as upstream verifies them.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

"test.region"() ({
  "test.br"()[^bb1] : () -> ()
^bb1:
  // expected-error@+1 {{reference to an undefined block}}
  "test.br"()[^missing] : () -> ()
}) : () -> ()

// -----

// A successor at the top level (the implicit module's block) names no block: refused where
// it stands, as upstream does (not as an unlocated predecessor of the entry block).
// expected-error@+1 {{reference to an undefined block}}
"test.br"()[^bb1] : () -> ()

// -----

// expected-error@+1 {{entry block of region may not have predecessors}}
"test.region"() ({
^bb0:
  "test.br"()[^bb0] : () -> ()
}) : () -> ()

// -----

"test.region"() ({
  // expected-error@+1 {{operation with block successors must terminate its parent block}}
  "test.br"()[^bb1] : () -> ()
  "test.other"() : () -> ()
^bb1:
  "test.end"() : () -> ()
}) : () -> ()

// -----

func.func @early_return(%a: i32) {
  // expected-error@+1 {{'func.return' op must be the last operation in the parent block}}
  "func.return"() : () -> ()
  %0 = arith.addi %a, %a : i32
}

// -----

func.func @dominance() {
  // expected-error@+1 {{does not dominate this use}}
  %0 = arith.addi %1, %1 : i32
  %1 = arith.constant 1 : i32
  return
}

// -----

// expected-error@+1 {{operation defines 2 results but was provided 1 to bind}}
%0 = "test.two"() : () -> (i32, i32)
