// Command-line mistakes exit 1 with a clear message (usage errors too, as in mlir-opt;
// tools/mercury-opt/tests/cli.rs and lit/tools/usage-exit.mlir check the exact codes).
// RUN: not %mercury-opt --no-such-flag %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN-FLAG
// UNKNOWN-FLAG: error: unexpected argument '--no-such-flag' found
// Pipeline errors are located in the pipeline text (<pass-pipeline>:line:col, with a caret).
// RUN: not %mercury-opt --pass-pipeline='builtin.module(no-such-pass)' %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN-PASS
// UNKNOWN-PASS: <pass-pipeline>:1:16: error: 'no-such-pass' does not refer to a registered pass (see --list-passes)
// UNKNOWN-PASS-NEXT: builtin.module(no-such-pass)
// UNKNOWN-PASS-NEXT: {{^               \^$}}
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalise)' %s 2>&1 | FileCheck %s --check-prefix=TYPO-PASS
// TYPO-PASS: <pass-pipeline>:1:16: error: 'canonicalise' does not refer to a registered pass; did you mean 'canonicalize'? (see --list-passes)
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize' %s 2>&1 | FileCheck %s --check-prefix=UNCLOSED
// UNCLOSED: <pass-pipeline>:1:15: error: missing ')' to close 'builtin.module'
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize{x=1)' %s 2>&1 | FileCheck %s --check-prefix=UNCLOSED-OPTS
// UNCLOSED-OPTS: <pass-pipeline>:1:28: error: missing '}' to close the options of 'canonicalize'
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize{x=1,symbol-dce{})' %s 2>&1 | FileCheck %s --check-prefix=SWALLOWED
// SWALLOWED: <pass-pipeline>:1:28: error: missing '}' to close the options of 'canonicalize' (a '{' follows at column 43)
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize symbol-dce)' %s 2>&1 | FileCheck %s --check-prefix=NO-COMMA
// NO-COMMA: <pass-pipeline>:1:29: error: expected ',' after pass 'canonicalize', found pass 'symbol-dce'
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize{x=1})' %s 2>&1 | FileCheck %s --check-prefix=BAD-OPTION
// BAD-OPTION: <pass-pipeline>:1:29: error: pass 'canonicalize' has no option 'x' (it takes none)
// RUN: not %mercury-opt --pass-pipeline='builtin.module(tile{axis=i, factor=4})' %s 2>&1 | FileCheck %s --check-prefix=COMMAS
// COMMAS: <pass-pipeline>:1:27: error: options of 'tile' are separated by spaces, not commas: {k1=v1 k2=v2}
// RUN: not %mercury-opt --canonicalize=x=1 %s 2>&1 | FileCheck %s --check-prefix=BAD-FLAG-OPTION
// BAD-FLAG-OPTION: mercury-opt: error: pass 'canonicalize' has no option 'x' (it takes none)
// RUN: not %mercury-opt '--canonicalize=a}b{' %s 2>&1 | FileCheck %s --check-prefix=GARBLED-FLAG-OPTION
// GARBLED-FLAG-OPTION: mercury-opt: error: bad options for --canonicalize
// RUN: not %mercury-opt --pass-pipeline='builtin.module(canonicalize)' --symbol-dce %s 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: mercury-opt: error: --pass-pipeline cannot be combined with individual pass flags (--symbol-dce)
// RUN: not %mercury-opt %s.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mercury-opt: error: could not open input file '{{.*}}cli-errors.mlir.does-not-exist': No such file or directory
// RUN: not %mercury-opt %S 2>&1 | FileCheck %s --check-prefix=DIRECTORY
// DIRECTORY: mercury-opt: error: could not open input file '{{.*}}': Is a directory
// RUN: not %mercury-opt %s -o %t.no-such-dir/out.mlir 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// UNWRITABLE: mercury-opt: error: could not write output file '{{.*}}out.mlir': No such file or directory
// RUN: not %mercury-opt --emit=ptx %s 2>&1 | FileCheck %s --check-prefix=EMIT
// EMIT: error: the module has no commir.kernel
// RUN: not %mercury-opt --verify-each=maybe %s 2>&1 | FileCheck %s --check-prefix=VERIFY-EACH
// VERIFY-EACH: error: invalid value 'maybe' for '--verify-each[=<BOOL>]'
// RUN: not %mercury-opt %s %s 2>&1 | FileCheck %s --check-prefix=TWO-INPUTS
// TWO-INPUTS: error: unexpected argument '{{.*}}cli-errors.mlir' found
// RUN: not %mercury-opt -o 2>&1 | FileCheck %s --check-prefix=NO-VALUE
// NO-VALUE: error: a value is required for '-o <FILE>' but none was supplied
"func.func"() ({
  func.return
}) {sym_name = "f", function_type = () -> ()} : () -> ()
