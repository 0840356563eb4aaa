use mercury_ir::{parse_str, print_op, verify, PrintOptions, Registry};

fn roundtrip(src: &str) -> String {
    let mut reg = Registry::new();
    reg.allow_unregistered = true;
    let m = parse_str(&reg, "t.mlir", src).unwrap_or_else(|d| panic!("{}", d.render()));
    verify(&reg, &m).unwrap_or_else(|d| panic!("{}", d.render()));
    let once = print_op(&reg, &m, PrintOptions::default());
    let m2 = parse_str(&reg, "t2.mlir", &once).unwrap_or_else(|d| panic!("{}\n{once}", d.render()));
    let twice = print_op(&reg, &m2, PrintOptions::default());
    assert_eq!(once, twice, "not a fixed point");
    once
}

#[test]
fn generic_ops_roundtrip() {
    let out = roundtrip(
        r#"
"func.func"() ({
^bb0(%a: f32, %b: tensor<4x?xbf16>):
  %0 = "arith.addf"(%a, %a) : (f32, f32) -> f32
  %c = "arith.constant"() {value = 3 : i32} : () -> i32
  %r:2 = "test.op"(%0, %b) {s = "x\"y", arr = [1, 2.5, @sym, true, unit, !test.t<a<b>>], d = {k}} : (f32, tensor<4x?xbf16>) -> (f32, i64)
  "func.return"(%r#0) : (f32) -> ()
}) {sym_name = "f", function_type = (f32, tensor<4x?xbf16>) -> f32} : () -> ()
"#,
    );
    eprintln!("{out}");
    assert!(out.contains("module {"), "{out}");
    assert!(out.contains("%0 = arith.addf %a, %a : f32"), "{out}");
    assert!(out.contains("return %r#0 : f32"), "{out}");
}

#[test]
fn errors_are_located() {
    let reg = Registry::new();
    let e = parse_str(&reg, "x.mlir", "\"a.b\"(%x) : (f32) -> ()").unwrap_err();
    assert!(
        e.render()
            .starts_with("x.mlir:1:7: error: use of undeclared SSA value name '%x'"),
        "{}",
        e.render()
    );
    let e = parse_str(
        &reg,
        "x.mlir",
        "module {\n  %0 = \"a.b\"() : () -> f32\n  }}",
    )
    .unwrap_err();
    assert!(e.render().starts_with("x.mlir:3:4:"), "{}", e.render());
}

/// String literals decode as MLIR's do, print back so that they read the same (here and in
/// upstream MLIR), and a bad escape is a located error wherever a string may stand.
#[test]
fn string_escapes_follow_mlir() {
    let out = roundtrip(
        r#""t\2Eop"() {s = "\00\41q", t = "a\09b", u = "\22\5C\0A", v = "\C3\A9\7F\e2\80\a8", "k\09" = @"s\0Ay", w = @a::@"b\22c"} : () -> ()"#,
    );
    assert!(out.contains(r#""t.op"() {"#), "{out}");
    assert!(out.contains(r#"s = "\00Aq""#), "{out}");
    assert!(out.contains(r#"t = "a\tb""#), "{out}");
    assert!(out.contains(r#"u = "\"\\\n""#), "{out}");
    assert!(out.contains(r#"v = "é\7F\E2\80\A8""#), "{out}");
    assert!(out.contains(r#""k\t" = @"s\ny""#), "{out}");
    assert!(out.contains(r#"w = @a::@"b\"c""#), "{out}");

    let mut reg = Registry::new();
    reg.allow_unregistered = true;
    for (src, want) in [
        (
            "\"a.b\"() {s = \"x\\qy\"} : () -> ()",
            "x.mlir:1:16: error: unknown escape in string literal",
        ),
        (
            "\"a.b\"() {\"k\\e\" = 1} : () -> ()",
            "x.mlir:1:12: error: unknown escape in string literal",
        ),
        (
            "\"a\\.b\"() : () -> ()",
            "x.mlir:1:3: error: unknown escape in string literal",
        ),
        (
            "\"a.b\"() {r = @\"s\\z\"} : () -> ()",
            "x.mlir:1:17: error: unknown escape in string literal",
        ),
        (
            "\"a.b\"() {r = @s::@\"\\4\"} : () -> ()",
            "x.mlir:1:20: error: unknown escape in string literal",
        ),
        (
            "\"a.b\"() {s = [\"ok\", \"\\FF\"]} : () -> ()",
            "x.mlir:1:22: error: invalid UTF-8 in string literal",
        ),
        (
            "\"a.b\"() {s = \"a\\\nb\"} : () -> ()",
            "x.mlir:1:16: error: unknown escape in string literal",
        ),
    ] {
        let e = parse_str(&reg, "x.mlir", src).unwrap_err();
        assert!(e.render().starts_with(want), "{src}: {}", e.render());
    }
}

/// Integer literals are decimal or hexadecimal (`0x10`, `-0x10`) wherever the text holds one, as
/// upstream MLIR reads them, and print in decimal; a hex literal of a float type is its bit
/// pattern (an infinity or a NaN too). Builtin shapes stay decimal (`tensor<0x10xf32>` is 0 by
/// 10, as upstream reads it). A literal past its type's range is a located error; a signless
/// type takes its two's complement range (`0x8000000000000000` is an i64, -2^63).
#[test]
fn hex_integer_literals_follow_mlir() {
    let out = roundtrip(
        r#"%r:0x2 = "test.x"() {a = 0x10 : i64, b = -0x10 : i64, c = 0xFF, d = 0xAbC : ui16, e = 0x7FFFFFFFFFFFFFFF, f = -0x8000000000000000 : i64, g = 0x1e5 : index, h = [0x1, -0x2], i = 0x3F800000 : f32, j = 0x3C00 : f16, k = 0x4000000000000000 : f64} : () -> (tensor<0x10xf32>, i32)"#,
    );
    let want = "%r:2 = \"test.x\"() {a = 16, b = -16, c = 255, d = 2748 : ui16, e = 9223372036854775807, f = -9223372036854775808, g = 485 : index, h = [1, -2], i = 1.0 : f32, j = 1.0 : f16, k = 2.0} : () -> (tensor<0x10xf32>, i32)";
    assert!(out.contains(want), "{out}");

    let mut reg = Registry::new();
    reg.allow_unregistered = true;
    for (src, want) in [
        (
            r#""a.b"() {v = 0x10000000000000000 : i64} : () -> ()"#,
            "x.mlir:1:14: error: integer constant out of range for attribute",
        ),
        (
            r#""a.b"() {v = -0x8000000000000001 : i64} : () -> ()"#,
            "x.mlir:1:14: error: integer constant out of range for attribute",
        ),
        (
            r#""a.b"() {v = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF} : () -> ()"#,
            "x.mlir:1:14: error: integer constant out of range for attribute",
        ),
        (
            r#""a.b"() {v = 0x100000000 : f32} : () -> ()"#,
            "x.mlir:1:14: error: hexadecimal float constant out of range for type 'f32'",
        ),
        (
            r#""a.b"() {v = -0x1 : f32} : () -> ()"#,
            "x.mlir:1:14: error: hexadecimal float literal should not have a leading minus",
        ),
        (
            r#"%r:0x1001 = "a.b"() : () -> ()"#,
            "x.mlir:1:4: error: expected named operation to have at least 1 result",
        ),
        (
            r#"%r:0xFFFFFFFFFFFFFFFFFFFF = "a.b"() : () -> ()"#,
            "x.mlir:1:4: error: expected named operation to have at least 1 result",
        ),
        // Not a literal: `0X` (upper case) and `0x` without a hex digit, as upstream lexes them.
        (r#""a.b"() {v = 0X10} : () -> ()"#, "x.mlir:1:15: error:"),
        (r#""a.b"() {v = 0xg} : () -> ()"#, "x.mlir:1:15: error:"),
    ] {
        let e = parse_str(&reg, "x.mlir", src).unwrap_err();
        assert!(e.render().starts_with(want), "{src}: {}", e.render());
    }
}
