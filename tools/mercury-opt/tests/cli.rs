//! The built `mercury-opt` binary: exit codes, and no panic or crash on garbled input or
//! arguments (a deterministic fuzz over the lit corpus, random bytes and random flags).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mercury-opt");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the binary with `args`, feeding `stdin`.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mercury-opt");
    let mut input = child.stdin.take().expect("stdin");
    // The tool may exit before reading everything (a usage error); a broken pipe is fine.
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().expect("wait for mercury-opt")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 0 or 1 (usage errors too: never 2) and nothing that looks like a crash: Rust's panic
/// and stack-overflow reports (not the words alone: an error quotes the input's line, and the
/// corpus's comments speak of panics).
fn assert_graceful(o: &Output, what: &dyn Fn() -> String) {
    let code = o.status.code();
    let allowed = matches!(code, Some(0) | Some(1));
    let err = stderr(o);
    let crashed = err.lines().any(|l| {
        (l.starts_with("thread '") && l.contains(" panicked at "))
            || l.contains("has overflowed its stack")
    });
    assert!(
        allowed && !crashed,
        "{}\nstatus: {:?}\nstderr:\n{err}",
        what(),
        o.status
    );
}

/// Deterministic xorshift64* generator (no dependency, same cases on every run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every `.mlir` file of the lit suite and the examples.
fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![repo().join("lit"), repo().join("examples")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "Output") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "mlir") {
                out.push((p.clone(), std::fs::read(&p).expect("read corpus file")));
            }
        }
    }
    out.sort();
    assert!(out.len() >= 10, "corpus too small: {}", out.len());
    out
}

#[test]
fn exit_codes() {
    let ok = "\"func.func\"() ({\n  func.return\n}) {sym_name = \"f\", function_type = () -> ()} : () -> ()\n";
    assert_eq!(run(&[], ok.as_bytes()).status.code(), Some(0));
    assert_eq!(run(&["-"], ok.as_bytes()).status.code(), Some(0));
    assert_eq!(run(&["--help"], b"").status.code(), Some(0));
    assert_eq!(run(&["--version"], b"").status.code(), Some(0));
    assert_eq!(run(&["--list-passes"], b"").status.code(), Some(0));
    // Input errors: 1.
    let bad = run(&[], b"%0 = \"arith.constant\"() : () -> i32\n");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad)
            .starts_with("<stdin>:1:6: error: 'arith.constant' op requires attribute 'value'\n"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(
        run(&["/nonexistent/input.mlir"], b"").status.code(),
        Some(1)
    );
    assert_eq!(
        run(&["--pass-pipeline=builtin.module(nope)"], ok.as_bytes())
            .status
            .code(),
        Some(1)
    );
    // Usage errors are bad input too: 1, as in mlir-opt (clap's own status would be 2).
    assert_eq!(run(&["--no-such-flag"], b"").status.code(), Some(1));
    assert_eq!(run(&["--emit=llvm"], b"").status.code(), Some(1));
    assert_eq!(run(&["-o"], b"").status.code(), Some(1));
    assert_eq!(
        run(&["--pass-pipeline=canonicalize", "--symbol-dce"], b"")
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn verify_diagnostics_success_is_silent() {
    let text =
        b"%0 = \"arith.constant\"() : () -> i32 // expected-error {{requires attribute 'value'}}\n";
    let o = run(&["--verify-diagnostics"], text);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    let o = run(
        &["--verify-diagnostics"],
        b"%0 = \"arith.constant\"() : () -> i32\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("unexpected error: 'arith.constant' op requires attribute 'value'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn closed_stdout_is_not_a_panic() {
    let mut big = String::new();
    for i in 0..20000 {
        big.push_str(&format!(
            "%v{i} = \"arith.constant\"() {{value = {i} : i32}} : () -> i32\n"
        ));
    }
    let dir = std::env::temp_dir().join(format!("mercury-opt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let input = dir.join("big.mlir");
    std::fs::write(&input, big).expect("write input");
    let child = Command::new(BIN)
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Close the read end before the tool writes its output.
    let Output { status, stderr, .. } = {
        let mut child = child;
        drop(child.stdout.take());
        child.wait_with_output().expect("wait")
    };
    let err = String::from_utf8_lossy(&stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        matches!(status.code(), Some(0) | Some(1)),
        "{status:?} {err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Truncations and byte-level mutations of every corpus file, in every mode that reads input.
#[test]
fn fuzz_corpus_mutations() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let modes: [&[&str]; 4] = [
        &["--allow-unregistered-dialect"],
        &["--split-input-file", "--verify-diagnostics"],
        &[
            "--allow-unregistered-dialect",
            "--split-input-file",
            "--canonicalize",
            "--symbol-dce",
            "--mlir-print-op-generic",
        ],
        &[
            "--split-input-file",
            "--allow-unregistered-dialect",
            "--mlir-print-ir-after-all",
            "--canonicalize",
        ],
    ];
    let alphabet = b"{}()[]<>%@^\"\\:,=-!#/ \n\t0xyz";
    let mut runs = 0;
    for (path, text) in corpus() {
        for k in 0..12 {
            let mut t = text.clone();
            match k % 4 {
                0 => t.truncate(rng.below(t.len() + 1)),
                1 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(t.len() + 1);
                        t.insert(at, alphabet[rng.below(alphabet.len())]);
                    }
                }
                2 => {
                    for _ in 0..1 + rng.below(4) {
                        if !t.is_empty() {
                            let at = rng.below(t.len());
                            t.remove(at);
                        }
                    }
                }
                _ => {
                    let a = rng.below(t.len() + 1);
                    let b = (a + rng.below(200)).min(t.len());
                    let slice = t[a..b].to_vec();
                    let at = rng.below(t.len() + 1);
                    t.splice(at..at, slice);
                }
            }
            let mode = modes[rng.below(modes.len())];
            let o = run(mode, &t);
            runs += 1;
            assert_graceful(&o, &|| {
                format!(
                    "{} mutation {k} with {mode:?}:\n{}",
                    path.display(),
                    String::from_utf8_lossy(&t)
                )
            });
        }
    }
    assert!(runs > 100, "only {runs} runs");
}

#[test]
fn fuzz_random_bytes() {
    let mut rng = Rng(42);
    for n in 0..100 {
        let len = rng.below(400);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let o = run(&["--split-input-file", "--verify-diagnostics"], &bytes);
        assert_graceful(&o, &|| format!("random input #{n}: {bytes:?}"));
    }
}

#[test]
fn fuzz_arguments() {
    let vocabulary = [
        "--canonicalize",
        "--symbol-dce",
        "--canonicalize=",
        "--canonicalize=x=1",
        "--symbol-dce={",
        "--pass-pipeline=builtin.module(canonicalize)",
        "--pass-pipeline=builtin.module(",
        "--pass-pipeline=",
        "--pass-pipeline=a{b=}}",
        "--pass-pipeline=builtin.module(canonicalize{=x})",
        "--split-input-file",
        "--verify-diagnostics",
        "--mlir-print-ir-after-all",
        "--mlir-print-op-generic",
        "--allow-unregistered-dialect",
        "--verify-each=false",
        "--verify-each",
        "--emit=mlir",
        "--emit",
        "-o",
        "-",
        "--",
        "-canonicalize",
        "-c",
        "--list-passes",
        "\u{1F600}",
        "",
    ];
    let input = b"%0 = \"arith.constant\"() {value = 1 : i32} : () -> i32\n";
    let mut rng = Rng(7);
    for _ in 0..150 {
        let args: Vec<&str> = (0..rng.below(5))
            .map(|_| vocabulary[rng.below(vocabulary.len())])
            .collect();
        // `-o` may name a file: keep it inside a scratch directory.
        let dir = std::env::temp_dir().join(format!("mercury-opt-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let o = Command::new(BIN)
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                let _ = c.stdin.take().expect("stdin").write_all(input);
                c.wait_with_output()
            })
            .expect("run");
        assert_graceful(&o, &|| format!("args {args:?}"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
