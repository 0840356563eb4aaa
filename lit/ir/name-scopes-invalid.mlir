// SSA name scopes as upstream's parser and verifier keep them: a region's names are those of
// the regions around it (a function body is no new scope), and a use across an op isolated
// from above is refused by the verifier. Checked by mercury-opt and by mlir-opt alike.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s
// RUN: %mlir-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// A function's body is not a new name scope: a name of the enclosing regions is not defined
// again there, not even in a function nested in a module.
// expected-note@+1 {{previously referenced here}}
func.func @f(%x: i32) {
  "test.region"() ({
    builtin.module {
      // expected-error@+1 {{region entry argument '%x' is already in use}}
      func.func @g(%x: i32) {
        return
      }
    }
    "test.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

// A value from outside an op isolated from above is not used inside it.
func.func @f(%x: i32) {
  "test.region"() ({
    builtin.module {
      // expected-note@+1 {{required by region isolation constraints}}
      func.func @g() {
        // expected-error@+1 {{'test.use' op using value defined outside the region}}
        "test.use"(%x) : (i32) -> ()
        return
      }
    }
    "test.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

// In a module, ops without a prefix are builtin's, even inside a function.
func.func @f() {
  "test.region"() ({
    builtin.module {
      // expected-error@+1 {{custom op 'func' is unknown (tried 'builtin.func' as well)}}
      func @g() {
        return
      }
    }
    "test.yield"() : () -> ()
  }) : () -> ()
  return
}
