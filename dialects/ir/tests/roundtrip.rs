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
    assert!(out.contains("func.return %r_0 : f32"), "{out}");
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
