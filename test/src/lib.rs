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

/// Deterministic xorshift64* generator: the same cases on every run, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// A random edit of `text`: a truncation, inserted syntax characters, deleted characters, or
/// a duplicated slice. Edits stay on character boundaries.
pub fn mutate(text: &str, rng: &mut Rng) -> String {
    const ALPHABET: &[&str] = &[
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "<",
        ">",
        "%",
        "@",
        "^",
        "\"",
        "\\",
        ":",
        ",",
        "=",
        "-",
        "->",
        "!",
        "#",
        "/",
        " ",
        "\n",
        "0",
        "x",
        "i32",
        "f32",
        "?",
        ".",
        "é",
        "// -----\n",
    ];
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let at = |rng: &mut Rng| bounds[rng.below(bounds.len())];
    let mut t = text.to_string();
    match rng.below(4) {
        0 => t.truncate(at(rng)),
        1 => {
            let pos = at(rng);
            t.insert_str(pos, ALPHABET[rng.below(ALPHABET.len())]);
        }
        2 => {
            let a = at(rng);
            let b = bounds
                .iter()
                .copied()
                .find(|&b| b >= a + 1 + rng.below(3))
                .unwrap_or(text.len());
            t.replace_range(a..b, "");
        }
        _ => {
            let a = at(rng);
            let b = bounds
                .iter()
                .copied()
                .find(|&b| b >= a + rng.below(120))
                .unwrap_or(text.len());
            let slice = text[a..b].to_string();
            t.insert_str(at(rng), &slice);
        }
    }
    t
}
