// File metadata `{-# ... #-}` that upstream refuses, with its errors where upstream puts them:
// a missing ':' or '{' is reported at the end of the text before the token found instead
// (past line breaks), as for every expected token.
// RUN: %mercury-opt --split-input-file --verify-diagnostics %s
// RUN: %mlir-opt --split-input-file --verify-diagnostics %s

// expected-error@+2 {{expected ':'}}
{-#
  dialect_resources
#-}

// -----

// expected-error@+3 {{expected ':'}}
{-#
  dialect_resources: {
    builtin
  }
#-}

// -----

// expected-error@+3 {{expected '{'}}
{-#
  external_resources: {
    some_tool: 1
  }
#-}

// -----

// expected-error@+4 {{expected ':'}}
{-#
  external_resources: {
    some_tool: {
      flag
      true
    }
  }
#-}

// -----

// expected-error@+2 {{unknown key 'resources' in file metadata dictionary}}
{-#
  resources: {}
#-}

// -----

// expected-error@+2 {{expected ',' or '#-}'}}
{-#
  external_resources: {}
  dialect_resources: {}
#-}

// -----

// expected-error@+4 {{expected hex string blob for key 'blob'}}
{-#
  dialect_resources: {
    builtin: {
      blob: 10
    }
  }
#-}

// -----

// expected-error@+3 {{dialect 'no_such_dialect' is unknown}}
{-#
  dialect_resources: {
    no_such_dialect: {
      blob: "0x04000000"
    }
  }
#-}
