//! The parser / verifier / printer target. An input is a CommIR text drawn from a `u64` seed
//! ([`input`]): a chunk of the repository's `.mlir` files or of `corpus/parser` with byte- or
//! token-level mutations, a splice of two chunks, or a kernel written by the structure-aware
//! generator ([`crate::gen`]), sometimes mutated too. [`check`] states the properties.

use crate::{catch, gen, located, Failure};
use mercury_ir::syntax::split::split_input;
use mercury_ir::{parse_str, print_op, verify, PrintOptions, Registry};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

/// One seed text: a `// -----` chunk of a corpus file.
#[derive(Debug, Clone)]
pub struct Seed {
    /// `path:first_line`, relative to the repository.
    pub name: String,
    /// The chunk's text.
    pub text: String,
}

fn mlir_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "Output") {
            mlir_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "mlir") {
            out.push(path);
        }
    }
}

/// The seed corpus: every `.mlir` chunk under `examples/`, `lit/` and this crate's
/// `corpus/parser` (regression inputs), sorted by path so that seeds mean the same inputs on
/// every machine.
pub fn seeds() -> Vec<Seed> {
    let mut files = Vec::new();
    for dir in [
        crate::repo().join("examples"),
        crate::repo().join("lit"),
        crate::corpus_dir().join("parser"),
    ] {
        mlir_files(&dir, &mut files);
    }
    files.sort();
    let root = crate::repo();
    let mut seeds = Vec::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        for chunk in split_input(&text) {
            seeds.push(Seed {
                name: format!("{rel}:{}", chunk.first_line),
                text: chunk.text,
            });
        }
    }
    seeds
}

/// Syntax fragments the byte-level mutations insert.
const BYTES: &[&str] = &[
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
    "\r\n",
    "\t",
    "0",
    "x",
    "?",
    ".",
    "*",
    "+",
    ";",
    "é",
    "\u{1F600}",
    "\0",
    "// -----\n",
    "//",
    "::",
];

/// Tokens of the CommIR syntax the token-level mutations insert or substitute.
const TOKENS: &[&str] = &[
    "commir.mesh",
    "commir.kernel",
    "commir.axis",
    "commir.buffer",
    "commir.for",
    "commir.load",
    "commir.reduce",
    "commir.store",
    "commir.patch",
    "commir.reshard",
    "commir.documents",
    "commir.matmul",
    "commir.unary",
    "commir.binary",
    "commir.scale",
    "commir.cast",
    "commir.mask",
    "commir.row_reduce",
    "module",
    "func.func",
    "arith.constant",
    "shape",
    "names",
    "bandwidth",
    "on",
    "spatial",
    "managed",
    "reduction",
    "min",
    "in",
    "out",
    "inout",
    "temp",
    "sharding",
    "R",
    "S",
    "zigzag",
    "striped",
    "parallel",
    "shift",
    "mod",
    "into",
    "add",
    "lse_merge",
    "carry",
    "to",
    "by",
    "at",
    "transpose_a",
    "transpose_b",
    "exp",
    "log",
    "gelu",
    "silu",
    "sub",
    "mul",
    "div",
    "max",
    "sum",
    "causal",
    "\"gemm\"",
    "\"attention\"",
    "!commir.tile<f32>",
    "!commir.tile<bf16>",
    "!commir.tile<f64>",
    "!commir.tile<i32>",
    "!commir.tile",
    "f32",
    "bf16",
    "f16",
    "f64",
    "i32",
    "index",
    "tensor<4xf32>",
    "@mesh",
    "@i",
    "@j",
    "@\"q s\"",
    "@\"\"",
    "%q",
    "%0",
    "%o",
    "{causal = true}",
    "{scale = 0.5}",
    "true",
    "false",
    "unit",
    "loc(\"x\":1:2)",
    "#commir",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    ",",
    ":",
    "=",
    "*",
    "+",
    "-",
    "->",
    "@",
    "%",
];

/// Numbers that sit on the edges of integer and float ranges.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "8",
    "16",
    "128",
    "255",
    "256",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "99999999999999999999999999999",
    "0x10",
    "0xFFFFFFFFFFFFFFFF",
    "1e308",
    "1e309",
    "-0.0",
    "0.0",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "4611686018427387904",
    "3037000500",
    "65537",
];

/// A token of a text for the token-level mutations: an identifier or keyword (letters,
/// digits, `_`, `.`, `$`), a number, a quoted string, whitespace or one other character.
fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$' {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.' || b[i] == b'$')
            {
                i += 1;
            }
        } else if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else {
            i += 1;
        }
        // Stay on character boundaries (multi-byte characters are one token).
        while i < b.len() && !text.is_char_boundary(i) {
            i += 1;
        }
        out.push(&text[start..i]);
    }
    out
}

/// One byte-level edit: a truncation, an inserted fragment, a deleted range, a duplicated
/// slice or a replaced character. Edits stay on character boundaries.
pub fn mutate_bytes(text: &str, rng: &mut ChaCha8Rng) -> String {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let at = |rng: &mut ChaCha8Rng| bounds[rng.gen_range(0..bounds.len())];
    let after = |a: usize, n: usize| {
        bounds
            .iter()
            .copied()
            .find(|&b| b >= a + n)
            .unwrap_or(text.len())
    };
    let mut t = text.to_string();
    match rng.gen_range(0..6) {
        0 => t.truncate(at(rng)),
        1 | 2 => t.insert_str(at(rng), BYTES.choose(rng).unwrap()),
        3 => {
            let a = at(rng);
            let b = after(a, rng.gen_range(1..8));
            t.replace_range(a..b, "");
        }
        4 => {
            let a = at(rng);
            let b = after(a, rng.gen_range(0..160));
            let slice = text[a..b].to_string();
            t.insert_str(at(rng), &slice);
        }
        _ => {
            let a = at(rng);
            let b = after(a, 1);
            let c = char::from(rng.gen_range(0x20u8..0x7f));
            t.replace_range(a..b, &c.to_string());
        }
    }
    t
}

/// One token-level edit: a token deleted, duplicated, swapped with another, or replaced by a
/// CommIR token, an edge-case number or another token of the text.
pub fn mutate_tokens(text: &str, rng: &mut ChaCha8Rng) -> String {
    let mut toks: Vec<String> = tokens(text).into_iter().map(String::from).collect();
    if toks.is_empty() {
        return TOKENS.choose(rng).unwrap().to_string();
    }
    let n = toks.len();
    let i = rng.gen_range(0..n);
    match rng.gen_range(0..7) {
        0 => {
            toks.remove(i);
        }
        1 => {
            let t = toks[i].clone();
            toks.insert(i, t);
        }
        2 => toks.swap(i, rng.gen_range(0..n)),
        3 => toks[i] = TOKENS.choose(rng).unwrap().to_string(),
        4 => {
            // Numbers are where overflow hides: replace one (or any token) by an edge value.
            let nums: Vec<usize> = (0..n)
                .filter(|&k| toks[k].bytes().all(|c| c.is_ascii_digit()))
                .collect();
            let k = nums.choose(rng).copied().unwrap_or(i);
            toks[k] = NUMBERS.choose(rng).unwrap().to_string();
        }
        5 => toks.insert(i, format!(" {} ", TOKENS.choose(rng).unwrap())),
        _ => toks[i] = toks[rng.gen_range(0..n)].clone(),
    }
    toks.concat()
}

/// How an input was made (for reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A corpus chunk with byte-level edits.
    Bytes,
    /// A corpus chunk with token-level edits.
    Tokens,
    /// Two corpus chunks spliced.
    Splice,
    /// The structure-aware generator (maybe with token-level edits).
    Generated,
}

/// The input of seed `seed`: deterministic given the seed corpus. Also says whether it is
/// checked with unregistered ops allowed.
pub fn input(seeds: &[Seed], seed: u64) -> (String, bool, Origin) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let allow = rng.gen_bool(0.3);
    let pick = |rng: &mut ChaCha8Rng| -> String {
        seeds
            .choose(rng)
            .map(|s| s.text.clone())
            .unwrap_or_default()
    };
    match rng.gen_range(0..20) {
        0..=5 => {
            let mut t = pick(&mut rng);
            for _ in 0..rng.gen_range(1..4) {
                t = mutate_bytes(&t, &mut rng);
            }
            (t, allow, Origin::Bytes)
        }
        6..=11 => {
            let mut t = pick(&mut rng);
            for _ in 0..rng.gen_range(1..4) {
                t = mutate_tokens(&t, &mut rng);
            }
            (t, allow, Origin::Tokens)
        }
        12 => {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let cut = |s: &str, rng: &mut ChaCha8Rng| {
                let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
                bounds.choose(rng).copied().unwrap_or(0)
            };
            let (ca, cb) = (cut(&a, &mut rng), cut(&b, &mut rng));
            (format!("{}{}", &a[..ca], &b[cb..]), allow, Origin::Splice)
        }
        _ => {
            let mut t = gen::module(&mut rng);
            if rng.gen_bool(0.4) {
                for _ in 0..rng.gen_range(1..3) {
                    t = mutate_tokens(&t, &mut rng);
                }
            }
            (t, allow, Origin::Generated)
        }
    }
}

/// What [`check`] saw of a valid run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Refused by the parser or the verifier, with a located error.
    Refused,
    /// Parsed and verified; its round trips hold.
    RoundTrips,
}

/// The properties for one text, given the registry it is read with:
/// - parsing and verifying never panic, and every error they report has a source location;
/// - what verifies prints to text that parses and verifies, and printing that prints the same
///   (a fixed point);
/// - the generic form parses back, verifies and prints the same custom text.
pub fn check(reg: &Registry, text: &str) -> Result<Verdict, Failure> {
    catch(|| check_inner(reg, text)).and_then(|r| r)
}

fn check_inner(reg: &Registry, text: &str) -> Result<Verdict, Failure> {
    let mismatch = |m: String| Err(Failure::Mismatch(m));
    let module = match parse_str(reg, "fuzz.mlir", text) {
        Ok(m) => m,
        Err(d) if located(&d) => return Ok(Verdict::Refused),
        Err(d) => return mismatch(format!("parse error without a location: {}", d.render())),
    };
    if let Err(d) = verify(reg, &module) {
        return if located(&d) {
            Ok(Verdict::Refused)
        } else {
            mismatch(format!("verifier error without a location: {}", d.render()))
        };
    }
    let once = print_op(reg, &module, PrintOptions::default());
    let reparsed = match parse_str(reg, "printed.mlir", &once) {
        Ok(m) => m,
        Err(d) => return mismatch(format!("printed IR does not parse: {}\n{once}", d.render())),
    };
    if let Err(d) = verify(reg, &reparsed) {
        return mismatch(format!(
            "printed IR does not verify: {}\n{once}",
            d.render()
        ));
    }
    let twice = print_op(reg, &reparsed, PrintOptions::default());
    if once != twice {
        return mismatch(format!(
            "printing is not a fixed point:\n--- once\n{once}\n--- twice\n{twice}"
        ));
    }
    let generic = print_op(
        reg,
        &module,
        PrintOptions {
            generic: true,
            ..Default::default()
        },
    );
    let from_generic = match parse_str(reg, "generic.mlir", &generic) {
        Ok(m) => m,
        Err(d) => {
            return mismatch(format!(
                "generic form does not parse: {}\n{generic}",
                d.render()
            ))
        }
    };
    if let Err(d) = verify(reg, &from_generic) {
        return mismatch(format!(
            "generic form does not verify: {}\n{generic}",
            d.render()
        ));
    }
    let again = print_op(reg, &from_generic, PrintOptions::default());
    if again != once {
        return mismatch(format!(
            "generic form reads back differently:\n--- custom\n{once}\n--- via generic\n{again}"
        ));
    }
    Ok(Verdict::RoundTrips)
}
