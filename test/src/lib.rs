//! Helpers for the cross-crate integration tests in `tests/`: the registries the tools use,
//! the corpus of `.mlir` files in the repository, and a deterministic random generator.
//!
//! - `tests/snapshots.rs`: insta snapshots of printed IR and rendered diagnostics;
//! - `tests/robustness.rs`: parse/verify/print/pass properties over mutated corpus inputs and
//!   deeply nested input.

use mercury_ir::pass::PassRegistry;
use mercury_ir::syntax::split::split_input;
use mercury_ir::Registry;
use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builtin dialects plus CommIR, as `mercury-opt` has them (the compile path's).
pub fn registry(allow_unregistered: bool) -> Registry {
    mercury_driver::registry(allow_unregistered)
}

/// Every pass, as `mercury-opt` has them (the compile path's).
pub fn passes() -> PassRegistry {
    mercury_driver::passes()
}

/// One `// -----` chunk of a corpus file.
#[derive(Debug, Clone)]
pub struct Case {
    /// `path:first_line`.
    pub name: String,
    pub text: String,
}

/// The chunks of every `.mlir` file under `lit/` and `examples/` (sorted, `Output/` skipped).
pub fn corpus() -> Vec<Case> {
    let mut files = Vec::new();
    let mut dirs = vec![repo().join("lit"), repo().join("examples")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "Output") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "mlir") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(repo())
            .unwrap_or(&path)
            .display()
            .to_string();
        for chunk in split_input(&text) {
            cases.push(Case {
                name: format!("{rel}:{}", chunk.first_line),
                text: chunk.text,
            });
        }
    }
    cases
}
