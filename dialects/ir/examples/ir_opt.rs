//! Parse, verify and print one file with the builtin, func and arith dialects only:
//! `cargo run -p mercury-ir --example ir_opt -- [--allow-unregistered-dialect]
//! [--mlir-print-debuginfo] [--mlir-print-op-generic] FILE`. A quick way to try the IR core
//! without building the compiler (mercury-opt does the same with every dialect).

use mercury_ir::{parse_source, print_op, verify, PrintOptions, Registry, SourceFile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut registry = Registry::new();
    registry.allow_unregistered = args.iter().any(|a| a == "--allow-unregistered-dialect");
    let opts = PrintOptions {
        generic: args.iter().any(|a| a == "--mlir-print-op-generic"),
        debuginfo: args.iter().any(|a| a == "--mlir-print-debuginfo"),
        ..Default::default()
    };
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: ir_opt [flags] FILE");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let file = SourceFile::new(path.as_str(), text);
    let result = parse_source(&registry, &file).and_then(|m| verify(&registry, &m).map(|()| m));
    match result {
        Ok(m) => print!("{}", print_op(&registry, &m, opts)),
        Err(d) => {
            eprint!("{}", d.render());
            std::process::exit(1);
        }
    }
}
