// Symbol tables as upstream verifies them (MLIR's Symbols and Symbol Tables): a flat
// reference resolves in the nearest symbol table only, every op with a `sym_name` in a table
// is one of its symbols, and a symbol's parent, if registered, is a symbol table. Checked by
// mercury-opt and by mlir-opt alike.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s
// RUN: %mlir-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// The outer module's @foo is not visible from inside the nested module @inner.
func.func @foo() {
  return
}
builtin.module @inner {
  func.func @bar() {
    // expected-error@+1 {{'func.call' op 'foo' does not reference a valid function}}
    func.call @foo() : () -> ()
    return
  }
}

// -----

// A nested module's own symbols resolve inside it.
func.func @foo() {
  return
}
builtin.module @inner {
  func.func @foo() {
    return
  }
  func.func @bar() {
    func.call @foo() : () -> ()
    return
  }
}

// -----

// Unregistered ops with a `sym_name` are symbols of the table too.
// expected-note@+1 {{see existing symbol definition here}}
"test.symbol"() {sym_name = "a"} : () -> ()
// expected-error@+1 {{redefinition of symbol named 'a'}}
"test.symbol"() {sym_name = "a"} : () -> ()

// -----

// expected-note@+1 {{see existing symbol definition here}}
builtin.module @m {
}
// expected-error@+1 {{redefinition of symbol named 'm'}}
builtin.module @m {
}

// -----

// A function is no symbol table: a function inside one is refused.
func.func @f() {
  // expected-error@+1 {{'func.func' op symbol's parent must have the SymbolTable trait}}
  func.func @g() {
    return
  }
  return
}

// -----

// Inside an unregistered op (which may be a symbol table) a function is not refused.
func.func @f() {
  "test.region"() ({
    func.func @g() {
      return
    }
    "test.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

// A module is a symbol when it has a name: then its parent is a symbol table too.
func.func @f() {
  // expected-error@+1 {{'builtin.module' op symbol's parent must have the SymbolTable trait}}
  builtin.module @m {
  }
  return
}

// -----

func.func @f() {
  builtin.module {
  }
  return
}
