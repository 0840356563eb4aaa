//! Properties of the IR core with CommIR registered, over the repository's `.mlir` corpus:
//! - the parser target's properties (`mercury_fuzz::parser::check`: no panic, located errors,
//!   printing a fixed point, the generic form reading back the same), plus: the builtin passes
//!   keep the IR valid;
//! - CRLF line ends change nothing;
//! - nesting up to the parser's limit works on an 8 MiB (main-thread sized) stack; deeper
//!   nesting is an error, not a stack overflow.
//!
//! Random edits of the same corpus are the fuzz crate's (tools/mercury-fuzz: a short run in
//! `cargo test`, the long one in docs/reliability.md).

use mercury_fuzz::parser::{self, Verdict};
use mercury_fuzz::{located, on_main_sized_stack};
use mercury_ir::pass::PassManager;
use mercury_ir::syntax::parser::MAX_NESTING;
use mercury_ir::{parse_str, print_op, verify, Location, PrintOptions, Registry};
use mercury_tests::{corpus, passes, registry, Case};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Checks every property for one input; `Err` describes the violation.
fn check(reg: &Registry, name: &str, text: &str) -> Result<(), String> {
    if parser::check(reg, text).map_err(|f| f.to_string())? == Verdict::Refused {
        return Ok(());
    }
    let module = parse_str(reg, name, text).map_err(|d| d.render())?;
    let once = print_op(reg, &module, PrintOptions::default());
    let mut pm = PassManager::new();
    pm.add_pipeline(&passes(), "builtin.module(canonicalize,symbol-dce)")
        .map_err(|e| e.to_string())?;
    let mut transformed = module;
    pm.run(&mut transformed, reg)
        .map_err(|d| format!("canonicalize,symbol-dce failed:\n{}\n{once}", d.render()))?;
    let after = print_op(reg, &transformed, PrintOptions::default());
    parse_str(reg, "transformed", &after)
        .map_err(|d| format!("transformed IR does not parse:\n{}\n{after}", d.render()))?;
    Ok(())
}

fn check_no_panic(reg: &Registry, case: &Case, text: &str) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| check(reg, &case.name, text))) {
        Ok(r) => r,
        Err(_) => Err("panicked".to_string()),
    }
    .map_err(|e| format!("{}:\n{e}\n--- input\n{text}", case.name))
}

#[test]
fn corpus_inputs_satisfy_the_properties() {
    let cases = corpus();
    assert!(cases.len() >= 50, "corpus has only {} chunks", cases.len());
    for allow in [false, true] {
        let reg = registry(allow);
        for case in &cases {
            check_no_panic(&reg, case, &case.text).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// CRLF line ends change nothing: what parses and verifies with LF does with CRLF, and prints
/// the same.
#[test]
fn crlf_line_ends_are_equivalent() {
    let reg = registry(true);
    let mut checked = 0;
    for case in corpus() {
        let Ok(lf) = parse_str(&reg, &case.name, &case.text) else {
            continue;
        };
        if verify(&reg, &lf).is_err() {
            continue;
        }
        let crlf_text = case.text.replace('\n', "\r\n");
        let crlf = parse_str(&reg, &case.name, &crlf_text)
            .unwrap_or_else(|d| panic!("{} with CRLF:\n{}", case.name, d.render()));
        assert_eq!(
            print_op(&reg, &crlf, PrintOptions::default()),
            print_op(&reg, &lf, PrintOptions::default()),
            "{} prints differently with CRLF",
            case.name
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} valid corpus chunks");
}

/// `depth` levels of one kind of nesting, closed.
fn nested(kind: &str, depth: usize) -> String {
    match kind {
        "region" => "\"test.op\"() ({\n".repeat(depth) + &"}) : () -> ()\n".repeat(depth),
        "array" => format!(
            "\"test.op\"() {{x = {}{}}} : () -> ()",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
        // Nested types (a tensor of tensors is not a type, as upstream has it).
        "tuple" => format!(
            "\"test.op\"() {{x = {}f32{}}} : () -> ()",
            "tuple<".repeat(depth),
            ">".repeat(depth)
        ),
        "dict" => format!(
            "\"test.op\"() {}1{} : () -> ()",
            "{x = ".repeat(depth),
            "}".repeat(depth)
        ),
        "func" => {
            let mut s = String::new();
            for _ in 0..depth {
                s.push_str("\"func.func\"() ({\n");
            }
            for i in 0..depth {
                s.push_str(&format!(
                    "}}) {{sym_name = \"f{i}\", function_type = () -> ()}} : () -> ()\n"
                ));
            }
            s
        }
        _ => unreachable!("unknown kind {kind}"),
    }
}

#[test]
fn nesting_up_to_the_limit_works_on_a_main_thread_stack() {
    on_main_sized_stack(|| {
        let reg = registry(true);
        for kind in ["region", "array", "tuple", "dict"] {
            // Close to the limit: the op, its attribute, the types in it and the explicit
            // `module` the printed form adds take a few levels of their own.
            let text = nested(kind, MAX_NESTING - 8);
            let m =
                parse_str(&reg, kind, &text).unwrap_or_else(|d| panic!("{kind}: {}", d.render()));
            verify(&reg, &m).unwrap_or_else(|d| panic!("{kind}: {}", d.render()));
            check(&reg, kind, &text).unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
    });
}

#[test]
fn nesting_past_the_limit_is_an_error() {
    on_main_sized_stack(|| {
        let reg = registry(true);
        for kind in ["region", "array", "tuple", "dict", "func"] {
            for depth in [MAX_NESTING + 1, 5_000, 100_000] {
                let e = parse_str(&reg, kind, &nested(kind, depth)).expect_err(kind);
                assert!(
                    e.message.contains("nesting too deep"),
                    "{kind} x{depth}: {}",
                    e.render()
                );
                assert!(located(&e));
            }
        }
    });
}

/// `SourceFile::location` (a binary search over line starts) agrees with a plain scan at every
/// character boundary, for split chunks (first line > 1), multi-byte characters and CRLF.
#[test]
fn locations_match_a_plain_scan() {
    use mercury_ir::SourceFile;
    let mut texts: Vec<String> = corpus().into_iter().take(20).map(|c| c.text).collect();
    texts.push("a\r\nb\u{e9}c\n\n\u{1F600}x\ny".to_string());
    texts.push(String::new());
    for (k, text) in texts.iter().enumerate() {
        let first_line = 1 + k as u32;
        let file = SourceFile::with_first_line("t.mlir", text.as_str(), first_line);
        for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
            let before = &text[..offset];
            let line = before.matches('\n').count() as u32 + first_line;
            let col = before.rsplit('\n').next().unwrap_or("").chars().count() as u32 + 1;
            match file.location(offset) {
                Location::File {
                    line: l, col: c, ..
                } => assert_eq!((l, c), (line, col), "text #{k} offset {offset}"),
                other => panic!("not a file position: {other:?}"),
            }
        }
        // Past the end clamps to the end.
        assert_eq!(file.location(text.len() + 10), file.location(text.len()));
    }
}
