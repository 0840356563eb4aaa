//! Runs the lit suite in `lit/` against the binaries this `cargo test` just built.
//!
//! cargo builds `mercury-opt` before its integration tests run, so `CARGO_BIN_EXE_mercury-opt`
//! names an up-to-date binary; its directory becomes `MERCURY_BIN_DIR` for `lit/lit.cfg.py`.
//! Without LLVM 22's lit the test fails under `CI=true` and is skipped loudly otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `lit-22` on PATH, else `lit` in `$(llvm-config-22 --prefix)/bin`.
fn find_lit() -> Option<PathBuf> {
    if let Some(lit) = on_path("lit-22") {
        return Some(lit);
    }
    let out = Command::new("llvm-config-22")
        .arg("--prefix")
        .output()
        .ok()?;
    let prefix = String::from_utf8(out.stdout).ok()?;
    let lit = Path::new(prefix.trim()).join("bin").join("lit");
    lit.is_file().then_some(lit)
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The number after `label` in lit's summary. lit pads the labels to one width when more than
/// one kind of result is listed (`  Passed     : 55 (93.22%)`), else prints `  Passed: 17`;
/// `label` is the bare word (`"Passed"`).
fn summary_count(output: &str, label: &str) -> Option<usize> {
    output.lines().find_map(|l| {
        l.trim()
            .strip_prefix(label)?
            .trim_start()
            .strip_prefix(':')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

#[test]
fn lit_suite() {
    let Some(lit) = find_lit() else {
        let hint =
            "LLVM 22's lit was not found (lit-22 on PATH or $(llvm-config-22 --prefix)/bin/lit): \
                    run `bash scripts/setup.sh` or `apt-get install llvm-22-tools mlir-22-tools`";
        if in_ci() {
            panic!("{hint}");
        }
        // Straight to the process's stderr: the test harness would capture `eprintln!`.
        let _ = writeln!(
            std::io::stderr(),
            "\n!!!!!!!! SKIPPED the lit suite: {hint} !!!!!!!!\n"
        );
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mercury-opt"))
        .parent()
        .expect("binary directory")
        .to_path_buf();
    // `cargo test --workspace` builds a package's binaries only for that package's own
    // integration tests, so mercury-run / mercury-tune may be missing here; their lit tests
    // would then be UNSUPPORTED. scripts/test.sh builds every binary first; under CI a
    // missing one fails instead of skipping.
    for sibling in ["mercury-run", "mercury-tune"] {
        if !bin_dir.join(sibling).is_file() {
            let hint = format!(
                "{sibling} is not built in {}: run `cargo build --workspace --bins` first \
                 (scripts/test.sh does), else its lit tests are UNSUPPORTED",
                bin_dir.display()
            );
            if in_ci() {
                panic!("{hint}");
            }
            let _ = writeln!(std::io::stderr(), "\n!!!!!!!! {hint} !!!!!!!!\n");
        }
    }
    let out = Command::new(&lit)
        .arg("-v")
        .arg(repo.join("lit"))
        .env("MERCURY_BIN_DIR", &bin_dir)
        .current_dir(&repo)
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", lit.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "lit failed ({}):\n{text}", out.status);
    let discovered = summary_count(&text, "Total Discovered Tests").unwrap_or(0);
    let passed = summary_count(&text, "Passed").unwrap_or(0);
    assert!(discovered > 0 && passed > 0, "lit ran no tests:\n{text}");
    for bad in ["Failed", "Unresolved", "Timed Out", "Unexpectedly Passed"] {
        assert!(
            summary_count(&text, bad).is_none(),
            "lit reported '{bad}':\n{text}"
        );
    }
}

#[test]
fn summary_count_reads_both_layouts() {
    let padded =
        "Total Discovered Tests: 59\n  Unsupported:  4 (6.78%)\n  Passed     : 55 (93.22%)\n";
    assert_eq!(summary_count(padded, "Total Discovered Tests"), Some(59));
    assert_eq!(summary_count(padded, "Passed"), Some(55));
    assert_eq!(summary_count(padded, "Unsupported"), Some(4));
    assert_eq!(summary_count(padded, "Failed"), None);
    let plain = "  Passed: 17 (100.00%)\n  Unexpectedly Passed: 1\n";
    assert_eq!(summary_count(plain, "Passed"), Some(17));
    assert_eq!(summary_count(plain, "Unexpectedly Passed"), Some(1));
}
