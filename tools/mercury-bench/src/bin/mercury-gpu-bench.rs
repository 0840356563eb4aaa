//! `mercury-gpu-bench`: GPU checks and benchmarks of the CUDA backend (P0 executor
//! self-checks, P1 GEMM patch vs cuBLAS, P2 attention patch, P3 RingAttention on virtual
//! ranks). Prints one summary table at the end; with `--sdpa-json` (the output of
//! `scripts/sdpa_baseline.py`) the attention rows get ratios against torch SDPA.
//!
//! Exit status: 0 when every check passed (and for `--help`), 1 when a check failed, the
//! `--json-out` file could not be written or the arguments are bad (an unknown flag or
//! `--only` section, a count of 0, an option given twice, an unreadable
//! `--device-kernels-ptx`: said before any GPU is looked for), 2 when no GPU was usable.

use mercury_bench::args::Flags;
use mercury_bench::bench::{Bench, BenchOptions, BenchRow};
use std::collections::BTreeMap;
use std::process::ExitCode;

const USAGE: &str = "usage: mercury-gpu-bench [--no-check] [--reps N] [--warmup N] [--seed N]
       [--only P0,P1,P2,P2c,P3] [--device-kernels-ptx FILE] [--sdpa-json FILE] [--json-out FILE]
       [--gemm-size N] [--ring-seq N] [--ring-ranks N]";

/// The sections `--only` names (upper-cased when read: `p2c` is `P2C`), in the order they run.
const SECTIONS: [&str; 5] = ["P0", "P1", "P2", "P2C", "P3"];

struct Args {
    opts: BenchOptions,
    only: Vec<String>,
    /// The text of `--device-kernels-ptx FILE`, read before the GPU is opened.
    ptx: Option<String>,
    sdpa: Option<String>,
    json_out: Option<String>,
    gemm_size: usize,
    ring_seq: usize,
    ring_ranks: usize,
}

/// The arguments; `Ok(None)` for `--help`. `Err`: a usage error (an unknown flag or section, a
/// bad or repeated value, an unreadable `--device-kernels-ptx`), before any GPU is looked for.
fn parse() -> Result<Option<Args>, String> {
    let mut a = Args {
        opts: BenchOptions::default(),
        only: SECTIONS.iter().map(|s| s.to_string()).collect(),
        ptx: None,
        sdpa: None,
        json_out: None,
        gemm_size: 8192,
        ring_seq: 32768,
        ring_ranks: 8,
    };
    let mut ptx: Option<String> = None;
    let mut it = Flags::new(std::env::args().skip(1), USAGE);
    while let Some(flag) = it.next_flag() {
        // Counts that cannot be 0 are refused, not raised to 1 behind the user's back.
        let mut at_least_one = |what: &str| match it.parse::<usize>(&flag)? {
            0 => Err(format!("{flag} must be at least 1 ({what})")),
            n => Ok(n),
        };
        match flag.as_str() {
            "--no-check" | "--check" => {
                it.switch_as(&flag, "--check")?;
                a.opts.check = flag == "--check";
            }
            "--reps" => a.opts.reps = at_least_one("timed repetitions, the median reported")?,
            "--warmup" => a.opts.warmup = it.parse(&flag)?,
            "--seed" => a.opts.seed = it.parse(&flag)?,
            "--only" => a.only = sections(&it.value(&flag)?)?,
            "--device-kernels-ptx" => ptx = Some(it.value(&flag)?),
            "--sdpa-json" => a.sdpa = Some(it.value(&flag)?),
            "--json-out" => a.json_out = Some(it.value(&flag)?),
            "--gemm-size" => a.gemm_size = at_least_one("M = N = K of the GEMM")?,
            "--ring-seq" => a.ring_seq = at_least_one("tokens of the ring")?,
            "--ring-ranks" => a.ring_ranks = at_least_one("virtual ranks of the ring")?,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if let Some(p) = ptx {
        a.ptx = Some(
            std::fs::read_to_string(&p)
                .map_err(|e| format!("cannot read --device-kernels-ptx '{p}': {e}"))?,
        );
    }
    Ok(Some(a))
}

/// `--only LIST`: comma-separated section names, any case; an unknown or empty one is refused
/// (it was dropped: `--only bogus` ran nothing and passed).
fn sections(list: &str) -> Result<Vec<String>, String> {
    list.split(',')
        .map(|s| {
            let name = s.trim().to_uppercase();
            if name.is_empty() {
                Err(format!("--only {list}: an empty section name"))
            } else if SECTIONS.contains(&name.as_str()) {
                Ok(name)
            } else {
                Err(format!(
                    "--only: unknown section '{}' (P0, P1, P2, P2c, P3)",
                    s.trim()
                ))
            }
        })
        .collect()
}

/// SDPA medians by (case id, backend) from `scripts/sdpa_baseline.py`'s JSON.
fn load_sdpa(path: &str) -> Result<BTreeMap<(String, String), f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let mut out = BTreeMap::new();
    for r in v["results"].as_array().into_iter().flatten() {
        if let (Some(id), Some(be), Some(ms)) =
            (r["id"].as_str(), r["backend"].as_str(), r["ms"].as_f64())
        {
            out.insert((id.to_string(), be.to_string()), ms);
        }
    }
    Ok(out)
}

fn find<'a>(rows: &'a [BenchRow], id: &str) -> Option<&'a BenchRow> {
    rows.iter().find(|r| r.id == id && r.median_ms > 0.0)
}

fn main() -> ExitCode {
    mercury_bench::init_logging();
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => {
            mercury_bench::outln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return mercury_driver::cli::usage_error("mercury-gpu-bench", &e),
    };
    let ctx = match mercury_kernels::cuda::open_context(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mercury-gpu-bench: error: no usable GPU: {e}");
            return ExitCode::from(2);
        }
    };
    let name = ctx.name().unwrap_or_else(|_| "?".into());
    let cc = ctx.compute_capability().unwrap_or((0, 0));
    mercury_bench::outln!(
        "device: {name} (sm_{}{}), seed {}",
        cc.0,
        cc.1,
        args.opts.seed
    );
    let mut bench = match Bench::new(ctx, args.opts.clone(), args.ptx.clone()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mercury-gpu-bench: error: setup failed: {e}");
            return ExitCode::from(2);
        }
    };
    let want = |p: &str| args.only.iter().any(|o| o == p);
    if want("P0") {
        if let Err(e) = bench.p0_executor() {
            bench.record_error("P0", &e);
        }
    }
    if want("P1") {
        if let Err(e) = bench.p1_gemm(args.gemm_size) {
            bench.record_error("P1", &e);
        }
    }
    if want("P2") {
        if let Err(e) = bench.p2_attention() {
            bench.record_error("P2", &e);
        }
    }
    if want("P2C") {
        if let Err(e) = bench.p2_cudnn() {
            bench.record_error("P2c", &e);
        }
    }
    if want("P3") {
        if let Err(e) = bench.p3_ring(args.ring_ranks, args.ring_seq) {
            bench.record_error("P3", &e);
        }
    }

    let sdpa = match &args.sdpa {
        Some(p) => match load_sdpa(p) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("warning: SDPA baselines not loaded: {e}");
                BTreeMap::new()
            }
        },
        None => BTreeMap::new(),
    };
    let rows = bench.rows().to_vec();
    let mut failed = 0;
    mercury_bench::outln!(
        "\n==== summary (device kernels: {}) ====",
        bench.device_kernels_origin()
    );
    mercury_bench::outln!(
        "{:<36} {:>10} {:>9}  {:<28} check",
        "case",
        "median ms",
        "TFLOP/s",
        "ratio"
    );
    for r in &rows {
        if !r.pass {
            failed += 1;
        }
        let mut ratio = String::new();
        if r.id.starts_with("P1.patch") {
            if let Some(d) = find(&rows, "P1.cublas_gemmex_bf16") {
                if r.median_ms > 0.0 {
                    ratio = format!("{:.3}x cuBLAS", d.median_ms / r.median_ms);
                }
            }
        } else if let Some(case) =
            r.id.strip_prefix("P2.")
                .or_else(|| r.id.strip_prefix("P2c."))
                .map(|c| {
                    c.trim_end_matches(".acc")
                        .trim_end_matches(".w8x16")
                        .trim_end_matches(".w4x32")
                })
        {
            let c = sdpa.get(&(case.to_string(), "CUDNN_ATTENTION".to_string()));
            let f = sdpa.get(&(case.to_string(), "FLASH_ATTENTION".to_string()));
            if r.median_ms > 0.0 {
                if let Some(c) = c {
                    ratio.push_str(&format!("{:.2}x cuDNN ", c / r.median_ms));
                }
                if let Some(f) = f {
                    ratio.push_str(&format!("{:.2}x FA2", f / r.median_ms));
                }
            }
        } else if r.id.starts_with("P3.") && !r.id.ends_with(".single_device") {
            let base = r.id.trim_end_matches(".peers");
            if let Some(s) = find(&rows, &format!("{base}.single_device")) {
                if r.median_ms > 0.0 && s.median_ms > 0.0 {
                    // Time ratio: the P3 goal is ring <= 1.10x the single-device time.
                    ratio = format!("{:.3}x single-dev time", r.median_ms / s.median_ms);
                }
            }
        }
        let check: String = r.check.chars().take(150).collect();
        mercury_bench::outln!(
            "{:<36} {:>10.3} {:>9.1}  {:<28} {}{}",
            r.id,
            r.median_ms,
            r.tflops,
            ratio,
            if r.pass { "" } else { "FAIL " },
            check
        );
    }
    mercury_bench::outln!(
        "{} rows, {} failed; attention variant after P2: {}",
        rows.len(),
        failed,
        bench.attention_variant().name()
    );
    if let Some(path) = &args.json_out {
        let j = serde_json::json!({
            "device_kernels": bench.device_kernels_origin(),
            "rows": rows.iter().map(|r| serde_json::json!({
                "id": r.id, "median_ms": r.median_ms, "min_ms": r.min_ms,
                "tflops": r.tflops, "check": r.check, "pass": r.pass,
            })).collect::<Vec<_>>(),
        });
        if let Err(e) = std::fs::write(path, j.to_string()) {
            // The rows are not where the caller looks for them: a failed run.
            eprintln!("mercury-gpu-bench: error: cannot write --json-out '{path}': {e}");
            failed += 1;
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
