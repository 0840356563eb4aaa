// String literals and quoted symbols decode as MLIR's lexer decodes them: `\"`, `\\`, `\n`,
// `\t` and `\XX` (two hex digits, one byte); any other escape is a located error, and so are
// `\XX` bytes that are not UTF-8. The printer writes `\"`, `\\`, `\n`, `\t` and what is not
// printable as `\XX`, so its output reads back here and in upstream MLIR, and upstream's output
// (which writes `"` as `\22`, a tab as `\09`, non-ASCII as bytes) reads back here.
// RUN: rm -rf %t && split-file --leading-lines %s %t
// Upstream reads what we print:
// RUN: %mercury-opt --allow-unregistered-dialect --mlir-print-op-generic %t/strings.mlir | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | FileCheck %s --check-prefix=UPSTREAM
// We read what upstream prints, to the same values:
// RUN: %mercury-opt --allow-unregistered-dialect --mlir-print-op-generic %t/strings.mlir | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | %mercury-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=BACK
// RUN: %mercury-opt --allow-unregistered-dialect %t/strings.mlir | %mercury-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=BACK
// The same through a registered dialect: index strings holding quoted symbols (`"\"1i\""`),
// which upstream prints as `"\221i\22"`.
// RUN: %mercury-opt --mlir-print-op-generic %t/commir.mlir | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir --mlir-print-op-generic | %mercury-opt | FileCheck %s --check-prefix=COMMIR
// Bad escapes, in every place a string may stand:
// RUN: not %mercury-opt --allow-unregistered-dialect --split-input-file %t/bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD --implicit-check-not=panicked

// UPSTREAM: "test.strings"() {arr = ["x\09", "A"], bs = "c:\\dir", ctl = "\01\1F\7F", hex = "\00Aq", "key\09" = @"sym\0Aname", nested = @"a\22b"::@"c\\d", nl = "l1\0Al2", q = "say \22hi\22", tab = "a\09b", uni = "\C3\A9\C3\A9\E2\80\A8"} : () -> ()

// BACK: "test.strings"() {
// BACK-DAG: tab = "a\tb"
// BACK-DAG: nl = "l1\nl2"
// BACK-DAG: q = "say \"hi\""
// BACK-DAG: bs = "c:\\dir"
// BACK-DAG: hex = "\00Aq"
// BACK-DAG: ctl = "\01\1F\7F"
// BACK-DAG: uni = "éé\E2\80\A8"
// BACK-DAG: "key\t" = @"sym\nname"
// BACK-DAG: nested = @"a\"b"::@"c\\d"
// BACK-DAG: arr = ["x\t", "A"]

// COMMIR: commir.kernel @"k 2" on @m {
// COMMIR: %[[A:.*]] = commir.load @"A b"[@"1i", @"i-j"] : !commir.tile<f32>
// COMMIR: commir.reduce add %[[A]] into @C[@"1i", @"i-j"] : !commir.tile<f32>

//--- strings.mlir
"test.strings"() {tab = "a\tb", nl = "l1\nl2", q = "say \"hi\"", bs = "c:\\dir", hex = "\00\41q", ctl = "\01\1f\7F", uni = "é\C3\A9\e2\80\a8", "key\09" = @"sym\0Aname", nested = @"a\22b"::@"c\5Cd", arr = ["x\09", "\41"]} : () -> ()

//--- commir.mlir
commir.mesh @m shape [4]
commir.kernel @"k 2" on @m {
  commir.axis @"i-j" = 64 spatial
  commir.axis @"1i" = 4 spatial
  commir.buffer @"A b" : [@"1i", @"i-j"] f32 in
  commir.buffer @C : [@"1i", @"i-j"] f32 out
  %a = commir.load @"A b"[@"1i", @"i-j"] : !commir.tile<f32>
  commir.reduce add %a into @C[@"1i", @"i-j"] : !commir.tile<f32>
}

//--- bad.mlir
// BAD: bad.mlir:[[@LINE+1]]:16: error: unknown escape in string literal
"t.a"() {s = "x\qy"} : () -> ()
// -----
// BAD: bad.mlir:[[@LINE+1]]:15: error: unknown escape in string literal
"t.a"() {s = "\4"} : () -> ()
// -----
// BAD: bad.mlir:[[@LINE+1]]:12: error: unknown escape in string literal
"t.a"() {"k\e" = 1} : () -> ()
// -----
// BAD: bad.mlir:[[@LINE+1]]:3: error: unknown escape in string literal
"t\.a"() : () -> ()
// -----
// BAD: bad.mlir:[[@LINE+1]]:20: error: unknown escape in string literal
"t.a"() {r = @s::@"\r"} : () -> ()
// -----
// The custom form's string tokens.
// BAD: bad.mlir:[[@LINE+1]]:35: error: unknown escape in string literal
commir.mesh @m shape [2] names ["a\qb"]
// -----
// BAD: bad.mlir:[[@LINE+1]]:22: error: invalid UTF-8 in string literal
"t.a"() {s = ["ok", "\FF"]} : () -> ()
// -----
// BAD: bad.mlir:[[@LINE+1]]:17: error: invalid UTF-8 in string literal
"t.a"() {s = "ok\E2\80"} : () -> ()
