//! insta snapshots of printed IR and rendered diagnostics (in `tests/snapshots/`). After an
//! intended change of the printed form, review and accept the new snapshots with
//! `cargo insta review`, or `INSTA_UPDATE=always cargo test -p mercury-tests --test snapshots`
//! and `git diff`. Under `CI=true` a mismatch fails and nothing is written.

use mercury_ir::pass::PassManager;
use mercury_ir::{parse_str, print_op, verify, Operation, PrintOptions, Registry};
use mercury_tests::{passes, registry, repo};

fn parse(reg: &Registry, name: &str, text: &str) -> Operation {
    let m = parse_str(reg, name, text).unwrap_or_else(|d| panic!("{}", d.render()));
    verify(reg, &m).unwrap_or_else(|d| panic!("{}", d.render()));
    m
}

const FUNCS: &str = r#"
"func.func"() ({
^bb0(%a: i32, %b: f32):
  %s = "arith.addi"(%a, %a) : (i32, i32) -> i32
  %unused = "arith.muli"(%s, %s) : (i32, i32) -> i32
  %f = "arith.mulf"(%b, %b) {fastmath = #arith.fastmath<fast>} : (f32, f32) -> f32
  "func.return"(%s, %f) : (i32, f32) -> ()
}) {sym_name = "main", function_type = (i32, f32) -> (i32, f32)} : () -> ()
"func.func"() ({
  "func.return"() : () -> ()
}) {sym_name = "helper", sym_visibility = "private", function_type = () -> ()} : () -> ()
"#;

#[test]
fn generic_input_prints_in_custom_form() {
    let reg = registry(false);
    insta::assert_snapshot!(
        "funcs_custom",
        print_op(
            &reg,
            &parse(&reg, "funcs.mlir", FUNCS),
            PrintOptions::default()
        )
    );
}

#[test]
fn canonicalize_and_symbol_dce() {
    let reg = registry(false);
    let mut m = parse(&reg, "funcs.mlir", FUNCS);
    let mut pm = PassManager::new();
    pm.add_pipeline(&passes(), "builtin.module(canonicalize,symbol-dce)")
        .expect("pipeline");
    pm.run(&mut m, &reg)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    insta::assert_snapshot!(
        "funcs_canonicalized",
        print_op(&reg, &m, PrintOptions::default())
    );
}

#[test]
fn attention_example() {
    let reg = registry(false);
    // A copy of examples/attention.mlir, so that editing the example does not churn snapshots.
    let path = repo().join("test/tests/inputs/attention.mlir");
    let text = std::fs::read_to_string(&path).expect("test/tests/inputs/attention.mlir");
    let m = parse(&reg, "attention.mlir", &text);
    insta::assert_snapshot!(
        "attention_custom",
        print_op(&reg, &m, PrintOptions::default())
    );
    insta::assert_snapshot!(
        "attention_generic",
        print_op(
            &reg,
            &m,
            PrintOptions {
                generic: true,
                ..Default::default()
            }
        )
    );
}

#[test]
fn rendered_diagnostics() {
    let reg = registry(false);
    let text = "\"func.func\"() ({\n  \"func.return\"() : () -> ()\n}) {sym_name = \"f\", function_type = () -> ()} : () -> ()\n\
                \"func.func\"() ({\n  \"func.return\"() : () -> ()\n}) {sym_name = \"f\", function_type = () -> ()} : () -> ()\n";
    let m = parse_str(&reg, "dup.mlir", text).expect("parses");
    let redefinition = verify(&reg, &m).expect_err("duplicate symbol").render();
    let parse_error = parse_str(
        &reg,
        "bad.mlir",
        "module {\n\t%0 = arith.addi %x, %x : i32\n}\n",
    )
    .expect_err("undeclared")
    .render();
    let end_of_input = parse_str(
        &reg,
        "cut.mlir",
        "%0 = \"arith.constant\"() {value = 1 : i32} : () ->\n",
    )
    .expect_err("truncated")
    .render();
    insta::assert_snapshot!(
        "diagnostics",
        format!("{redefinition}\n{parse_error}\n{end_of_input}")
    );
}
