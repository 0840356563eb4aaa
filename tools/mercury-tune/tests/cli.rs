//! The binary end to end: outputs, exit codes and error messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mercury-tune"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mercury-tune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn attention_example_ranks_and_writes_outputs() {
    let out = tmp("ok");
    let ex = example("attention-mha-32k.toml");
    let start = std::time::Instant::now();
    let o = run(&[
        ex.to_str().unwrap(),
        "--topology",
        "h100-2x4",
        "--out",
        out.to_str().unwrap(),
    ]);
    let took = start.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("chosen:"), "{stdout}");
    for f in [
        "schedule.json",
        "schedule.transform",
        "pareto.json",
        "pareto.svg",
        "tuning-report.json",
        "trace.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // The CommIR generator lowers and simulates 100 candidates: about 3 s for the debug build
    // alone on 2 cores, more beside other tests; the release binary takes a fraction of that.
    assert!(took < 30.0, "took {took} s");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn cache_round_trip_through_the_binary() {
    let out = tmp("cache-out");
    let cache = tmp("cache-dir");
    let ex = example("attention-mha-32k.toml");
    let args = [
        ex.to_str().unwrap(),
        "--topology",
        "h100-2x4",
        "--out",
        out.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cache miss"));
    let o = run(&args);
    assert!(String::from_utf8_lossy(&o.stdout).contains("cache hit"));
    // Corrupt the entry: a warning, then a normal search.
    for f in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(f.unwrap().path(), "garbage").unwrap();
    }
    let o = run(&args);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("warning: schedule cache entry is corrupt"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&cache);
}

/// Runs `mercury-tune OP --topology TOPO --out OUT`, asserts its exit code and that standard
/// error contains every one of `needles`.
fn refused(op: &Path, topo: &str, out: &str, code: i32, needles: &[&str]) {
    let o = run(&[op.to_str().unwrap(), "--topology", topo, "--out", out]);
    assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
    for n in needles {
        assert!(stderr(&o).contains(n), "'{n}' missing: {}", stderr(&o));
    }
}

#[test]
fn bad_inputs_give_clear_errors() {
    let out = tmp("bad");
    let o_s = out.to_str().unwrap();
    let ex = example("attention-mha-32k.toml");
    // Unknown topology.
    refused(&ex, "h900-9x9", o_s, 1, &["h100-2x4"]);
    // Invalid topology file.
    let bad_topo = tmp("topo.toml");
    std::fs::write(&bad_topo, "name = \"x\"\nlevels = []\n").unwrap();
    refused(&ex, bad_topo.to_str().unwrap(), o_s, 1, &["topo.toml"]);
    // Invalid operator file.
    let bad_op = tmp("op.toml");
    std::fs::write(&bad_op, "[attention]\nbatch = 1\n").unwrap();
    refused(&bad_op, "h100-2x4", o_s, 1, &["op.toml", "missing field"]);
    // Missing file, CommIR file without a kernel.
    refused(
        Path::new("/nonexistent/x.toml"),
        "h100-2x4",
        o_s,
        1,
        &["cannot read"],
    );
    let mlir = tmp("k.mlir");
    std::fs::write(&mlir, "module {}").unwrap();
    refused(&mlir, "h100-2x4", o_s, 1, &["expected one kernel, found 0"]);
    // Nothing fits: exit code 2.
    let big = tmp("big.toml");
    std::fs::write(
        &big,
        "[attention]\nbatch = 16\nheads = 32\nkv_heads = 32\nseq = 2097152\nhead_dim = 128\n",
    )
    .unwrap();
    refused(&big, "h200-1x8", o_s, 2, &["no usable schedule"]);
    for p in [bad_topo, bad_op, mlir, big] {
        let _ = std::fs::remove_dir_all(&p);
        let _ = std::fs::remove_file(&p);
    }
}

fn repo_example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
}

/// `--profile-top` on the CPU executor: the model's best measured checked, the measured best
/// chosen and reported with the ranking error; `profile.json` written.
#[test]
fn profile_top_on_the_cpu_backend_reports_the_ranking_error() {
    let out = tmp("profile-cpu");
    let ex = repo_example("small/attention.mlir");
    let o = run(&[
        ex.to_str().unwrap(),
        "--topology",
        "h200-1x8",
        "--out",
        out.to_str().unwrap(),
        "--profile-top",
        "2",
        "--backend",
        "cpu",
        "--iters",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for want in [
        "profile:   cpu",
        "model #1",
        "model #2",
        "model pick",
        "measured pick",
        "within 5%:",
        "Kendall tau",
        "CPU-seconds (no GPU used)",
        "schedule:  ",
    ] {
        assert!(stdout.contains(want), "{want} missing:\n{stdout}");
    }
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    let rows = p["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["measured_s"].as_f64().is_some()));
    let chosen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("schedule.json")).unwrap()).unwrap();
    assert_eq!(chosen["schedule"]["name"], p["measured_pick"]);
    let _ = std::fs::remove_dir_all(&out);
}

/// `--profile-top` on the GPU backend without a GPU: says so and exits 2 before searching
/// (no silent fall-back to the model).
#[test]
fn profile_top_without_a_gpu_exits_2() {
    if Path::new("/dev/nvidia0").exists() {
        eprintln!("a GPU is present: the no-GPU path is not reachable here");
        return;
    }
    let out = tmp("profile-nogpu");
    let ex = repo_example("small/attention.mlir");
    let o = run(&[
        ex.to_str().unwrap(),
        "--topology",
        "h200-1x8",
        "--out",
        out.to_str().unwrap(),
        "--profile-top",
        "4",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--profile-top") && (e.contains("no usable GPU") || e.contains("no CUDA")),
        "{e}"
    );
    assert!(!out.join("schedule.json").exists(), "nothing written");
}

/// `--launcher` is refused where the processes could take different paths (no profiling, the
/// CPU backend, a cache, no search), before anything is searched or written.
#[test]
fn launcher_refuses_what_the_processes_cannot_share() {
    let out = tmp("launcher");
    let ex = repo_example("small/attention.mlir");
    let base = [
        ex.to_str().unwrap(),
        "--topology",
        "h200-1x8",
        "--out",
        out.to_str().unwrap(),
        "--launcher",
        "env",
    ];
    for (extra, want) in [
        (&[][..], "needs --profile-top"),
        (
            &["--profile-top", "2", "--backend", "cpu"][..],
            "needs --profile-top and --backend cuda",
        ),
        (
            &["--profile-top", "2", "--cache", "/tmp/x"][..],
            "does not take --cache",
        ),
        (
            &["--profile-top", "2", "--no-search"][..],
            "does not take --no-search",
        ),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
        assert!(!out.join("schedule.json").exists(), "nothing written");
    }
    // The launcher's environment and the GPU flags are checked before the search and before
    // any GPU probe: bad input, exit 1.
    let profile = ["--profile-top", "2"];
    let o = bin()
        .args(base.iter().chain(&profile))
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("RANK and WORLD_SIZE are not set"),
        "{}",
        stderr(&o)
    );
    let o = bin()
        .args(base.iter().chain(&profile).chain(&["--transport", "peer"]))
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "0")
        .env("MERCURY_NCCL_ID_FILE", out.join("id").to_str().unwrap())
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the GPU flags (--iters 10 --warmup 3 --transport peer --launcher env): --launcher env talks"),
        "flags as written, not Rust's Debug form of a list; one 'error:': {}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("does not take --transport peer"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("schedule.json").exists(), "nothing written");
}

/// The declared mesh is kept unless --refactor-mesh; a topology of another size is refused
/// with the flag named.
#[test]
fn declared_mesh_is_kept_unless_refactored() {
    let ex = repo_example("small/attention.mlir");
    let ex_s = ex.to_str().unwrap();
    let out = tmp("mesh");
    let o_s = out.to_str().unwrap();
    let o = run(&[ex_s, "--topology", "h100-2x4", "--out", o_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(kept.contains("chosen:    mesh 8:"), "{kept}");
    let script = std::fs::read_to_string(out.join("schedule.transform")).unwrap();
    assert!(!script.contains("reshape-mesh"), "{script}");
    let o = run(&[
        ex_s,
        "--topology",
        "h100-2x4",
        "--out",
        o_s,
        "--refactor-mesh",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let seen = |s: &str| -> usize {
        s.lines()
            .find_map(|l| l.strip_prefix("searched:  "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap()
    };
    let refactored = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(seen(&refactored) > seen(&kept), "{refactored}");
    let o = run(&[ex_s, "--topology", "h100-1x4", "--out", o_s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--refactor-mesh"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&out);
}

/// Skipped candidates are a count per reason, not one line each; a `.toml` description writes
/// the operator its transform applies to. Grouped-query attention with 2 key/value heads on 8
/// devices: the candidates that split the heads 4 or 8 ways are refused.
#[test]
fn skipped_candidates_are_summarised() {
    let out = tmp("skips");
    let ex = tmp("skips-gqa.toml");
    std::fs::write(
        &ex,
        "[attention]\nbatch = 1\nheads = 32\nkv_heads = 2\nseq = 32768\nhead_dim = 128\n",
    )
    .unwrap();
    let o = run(&[
        ex.to_str().unwrap(),
        "--topology",
        "h100-2x4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let e = stderr(&o);
    assert!(!e.contains("candidate skipped"), "one line per skip:\n{e}");
    let head = stdout
        .lines()
        .find(|l| l.starts_with("skipped:   "))
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    let total: usize = head["skipped:   ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let counts: Vec<usize> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("skipped:   "))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), total, "{stdout}");
    assert!(counts.len() < total, "not summarised:\n{stdout}");
    assert!(out.join("operator.mlir").is_file());
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&ex);
}
