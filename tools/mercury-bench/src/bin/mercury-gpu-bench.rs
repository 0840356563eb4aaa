//! `mercury-gpu-bench`: GPU checks and benchmarks of the CUDA backend (P0 executor
//! self-checks, P1 GEMM patch vs cuBLAS, P2 attention patch, P3 RingAttention on virtual
//! ranks). Prints one summary table at the end; with `--sdpa-json` (the output of
//! `scripts/sdpa_baseline.py`) the attention rows get ratios against torch SDPA.
//!
//! Exit status: 0 when every check passed (and for `--help`), 1 when a check failed, the
//! `--json-out` file could not be written or the arguments are bad (an unknown flag or
//! `--only` section, a count of 0, an option given twice, an unreadable
//! `--device-kernels-ptx`: said by clap, `error: ...`, before any GPU is looked for), 2 when
//! no GPU was usable.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Parser;
use mercury_bench::args::{at_least_one, read_ptx};
use mercury_bench::bench::{Bench, BenchOptions, BenchRow, Regime, Section, SectionArgs, SECTIONS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `--only`'s values: the names of [`SECTIONS`] in any case, each read as its index there.
#[derive(Debug, Clone, Copy)]
struct SectionParser;

impl SectionParser {
    fn names() -> impl Iterator<Item = PossibleValue> {
        SECTIONS
            .iter()
            .map(|s| PossibleValue::new(s.name).help(s.about))
    }
}

impl TypedValueParser for SectionParser {
    type Value = usize;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<usize, clap::Error> {
        let name = PossibleValuesParser::new(Self::names()).parse_ref(cmd, arg, value)?;
        SECTIONS
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(&name))
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(Self::names()))
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "mercury-gpu-bench",
    version,
    about = "GPU checks and benchmarks of the CUDA backend (P0 executor self-checks, P1 GEMM, P2/P2c attention patches, P2b attention backward, P3 RingAttention on virtual ranks)"
)]
struct Args {
    /// Skip the numerical checks.
    #[arg(long, conflicts_with = "check")]
    no_check: bool,
    /// Run the numerical checks (the default).
    #[arg(long)]
    check: bool,
    /// Timed repetitions per case, the median reported.
    #[arg(long, value_name = "N", default_value_t = BenchOptions::default().reps,
          allow_negative_numbers = true, value_parser = at_least_one("timed repetitions, the median reported"))]
    reps: usize,
    /// Untimed warm-up runs per case.
    #[arg(long, value_name = "N", default_value_t = BenchOptions::default().warmup,
          allow_negative_numbers = true)]
    warmup: usize,
    /// How the GPU is loaded before each case's timed calls: `back-to-back` (the warm-up
    /// calls, then the timed ones), `idle=MS` (MS milliseconds idle first), `sustained=MS`
    /// (the call back to back for MS milliseconds first) or `idle=MS,sustained=MS` (both: the
    /// same history for every case and either side).
    /// `scripts/sdpa_baseline.py --regime` takes the same values, so that the two sides are
    /// timed alike.
    #[arg(long, value_name = "REGIME", default_value = "back-to-back")]
    regime: Regime,
    /// P2c and P2b: only the timed cases with these ids (comma-separated, as in
    /// `scripts/sdpa_baseline.py`), without the check-only shapes, the ring steps and the
    /// accumulation rows.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    p2c_cases: Vec<String>,
    /// Base seed of the random inputs (default: a fresh one every run).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// The sections to run, comma-separated, any case (default: every one, in this order).
    #[arg(long, value_name = "SECTIONS", value_delimiter = ',', ignore_case = true,
          action = clap::ArgAction::Set, value_parser = SectionParser)]
    only: Vec<usize>,
    /// The device kernels' PTX (from `mercury-opt --emit=ptx --all-device-kernels`) instead of
    /// compiling it here; read before any GPU is looked for.
    #[arg(long, value_name = "FILE")]
    device_kernels_ptx: Option<PathBuf>,
    /// torch SDPA medians (`scripts/sdpa_baseline.py --out`, `scripts/sdpa_bwd_baseline.py
    /// --out`; may be given more than once): the attention rows get ratios.
    #[arg(long, value_name = "FILE")]
    sdpa_json: Vec<PathBuf>,
    /// Write the summary's rows as JSON.
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// M = N = K of the P1 GEMM.
    #[arg(long, value_name = "N", default_value_t = 8192,
          allow_negative_numbers = true, value_parser = at_least_one("M = N = K of the GEMM"))]
    gemm_size: usize,
    /// Tokens of the P3 ring.
    #[arg(long, value_name = "N", default_value_t = 32768,
          allow_negative_numbers = true, value_parser = at_least_one("tokens of the ring"))]
    ring_seq: usize,
    /// Virtual ranks of the P3 ring.
    #[arg(long, value_name = "N", default_value_t = 8,
          allow_negative_numbers = true, value_parser = at_least_one("virtual ranks of the ring"))]
    ring_ranks: usize,
    /// The text of `--device-kernels-ptx`.
    #[arg(skip)]
    ptx: Option<String>,
}

/// The arguments. `Err`: `--help` or `--version`, or a usage error (an unknown flag or
/// section, a bad or repeated value, an unreadable `--device-kernels-ptx`), before any GPU is
/// looked for.
fn parse() -> Result<Args, clap::Error> {
    let mut a = Args::try_parse()?;
    let known = mercury_bench::bench::cudnn::timed_ids();
    if let Some(bad) = a.p2c_cases.iter().find(|id| !known.contains(&id.as_str())) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!(
                "--p2c-cases: no timed case '{bad}' (the timed cases: {})\n",
                known.join(", ")
            ),
        ));
    }
    a.ptx = read_ptx(a.device_kernels_ptx.as_deref())?;
    Ok(a)
}

impl Args {
    /// The sections to run, in the order of [`SECTIONS`].
    fn sections(&self) -> Vec<&'static Section> {
        SECTIONS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.only.is_empty() || self.only.contains(i))
            .map(|(_, s)| s)
            .collect()
    }

    /// The options of the benchmark, the seed a fresh one unless given.
    fn options(&self) -> BenchOptions {
        BenchOptions {
            warmup: self.warmup,
            reps: self.reps,
            regime: self.regime,
            p2c_cases: self.p2c_cases.clone(),
            check: !self.no_check,
            seed: self.seed.unwrap_or_else(|| BenchOptions::default().seed),
        }
    }
}

/// The bits of this bench's inputs, in `scripts/sdpa_baseline.py --inputs`'s terms: uniform
/// draws with every mantissa bit random, rounded to the 16-bit type (`fill_random_bf16`).
/// Under the H200's power limit the clock follows the data's bits: torch's `bf16-rand` inputs
/// (256 levels) ran 1.2-2.5% faster than `f32-rand` on the same kernel (docs/perf.md,
/// "Method").
const OUR_INPUTS: &str = "f32-rand";

/// SDPA medians by (case id, backend) from `scripts/sdpa_baseline.py`'s JSON, the regime
/// they were timed in (`None`: `do_bench`, or a file from before the script recorded it), and
/// the inputs it drew (a file from before the script recorded them drew `bf16-rand`).
struct Sdpa {
    ms: BTreeMap<(String, String), f64>,
    regime: Option<Regime>,
    inputs: String,
}

fn load_sdpa(path: &Path) -> Result<Sdpa, String> {
    let p = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{p}: {e}"))?;
    let mut ms = BTreeMap::new();
    for r in v["results"].as_array().into_iter().flatten() {
        if let (Some(id), Some(be), Some(t)) =
            (r["id"].as_str(), r["backend"].as_str(), r["ms"].as_f64())
        {
            ms.insert((id.to_string(), be.to_string()), t);
        }
    }
    let regime = v["regime"].as_str().and_then(|r| r.parse().ok());
    let inputs = v["inputs"].as_str().unwrap_or("bf16-rand").to_string();
    Ok(Sdpa { ms, regime, inputs })
}

fn find<'a>(rows: &'a [BenchRow], id: &str) -> Option<&'a BenchRow> {
    rows.iter().find(|r| r.id == id && r.median_ms > 0.0)
}

fn main() -> ExitCode {
    mercury_bench::init_logging();
    let args = match parse() {
        Ok(a) => a,
        // Help and version exit 0, usage errors 1.
        Err(e) => return mercury_driver::cli::clap_failure(&e),
    };
    let opts = args.options();
    let ctx = match mercury_kernels::cuda::open_context(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mercury-gpu-bench: error: no usable GPU: {e}");
            return ExitCode::from(2);
        }
    };
    let name = ctx.name().unwrap_or_else(|_| "?".into());
    let cc = ctx.compute_capability().unwrap_or((0, 0));
    mercury_bench::outln!("device: {name} (sm_{}{}), seed {}", cc.0, cc.1, opts.seed);
    let mut bench = match Bench::new(ctx, opts, args.ptx.clone()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mercury-gpu-bench: error: setup failed: {e}");
            return ExitCode::from(2);
        }
    };
    let section_args = SectionArgs {
        gemm_size: args.gemm_size,
        ring_ranks: args.ring_ranks,
        ring_seq: args.ring_seq,
    };
    for section in args.sections() {
        if let Err(e) = (section.run)(&mut bench, &section_args) {
            bench.record_error(section.name, &e);
        }
    }

    let none = || Sdpa {
        ms: BTreeMap::new(),
        regime: None,
        inputs: OUR_INPUTS.to_string(),
    };
    // Several files merge; the regime and inputs are the files' when they agree (else none:
    // the ratios are marked unalike).
    let mut sdpa = none();
    for (i, p) in args.sdpa_json.iter().enumerate() {
        match load_sdpa(p) {
            Ok(f) => {
                if i == 0 {
                    sdpa.regime = f.regime;
                    sdpa.inputs = f.inputs;
                } else {
                    if sdpa.regime != f.regime {
                        sdpa.regime = None;
                    }
                    if sdpa.inputs != f.inputs {
                        sdpa.inputs = format!("{} and {}", sdpa.inputs, f.inputs);
                    }
                }
                sdpa.ms.extend(f.ms);
            }
            Err(e) => eprintln!("warning: SDPA baselines not loaded: {e}"),
        }
    }
    // A ratio against torch's times means something only when both sides were timed alike,
    // on inputs of alike bits.
    let timed_alike = sdpa.regime == Some(args.regime);
    let inputs_alike = sdpa.inputs == OUR_INPUTS;
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
            let c = sdpa
                .ms
                .get(&(case.to_string(), "CUDNN_ATTENTION".to_string()));
            let f = sdpa
                .ms
                .get(&(case.to_string(), "FLASH_ATTENTION".to_string()));
            if r.median_ms > 0.0 {
                if let Some(c) = c {
                    ratio.push_str(&format!("{:.2}x cuDNN ", c / r.median_ms));
                }
                if let Some(f) = f {
                    ratio.push_str(&format!("{:.2}x FA2", f / r.median_ms));
                }
                if c.is_some() || f.is_some() {
                    if !timed_alike {
                        ratio.push_str(" (timed unalike)");
                    }
                    if !inputs_alike {
                        ratio.push_str(" (inputs unalike)");
                    }
                }
            }
        } else if let Some(case) = r.id.strip_prefix("P2b.") {
            // scripts/sdpa_bwd_baseline.py: torch's cuDNN backward alone, same shape.
            if let (Some(c), true) = (
                sdpa.ms.get(&(case.to_string(), "CUDNN_BWD".to_string())),
                r.median_ms > 0.0,
            ) {
                ratio = format!("{:.3}x cuDNN bwd", c / r.median_ms);
                if !timed_alike {
                    ratio.push_str(" (timed unalike)");
                }
                if !inputs_alike {
                    ratio.push_str(" (inputs unalike)");
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
    if !sdpa.ms.is_empty() && !timed_alike {
        mercury_bench::outln!(
            "note: torch's times were taken {}, ours {:?}: the H200's clocks move 2-12% with the load before a call, so a ratio marked 'timed unalike' is not a comparison within that (give both --regime alike; docs/perf.md, \"Method\")",
            sdpa.regime.map_or("by do_bench".to_string(), |g| format!("{g:?}")),
            args.regime
        );
    }
    if !sdpa.ms.is_empty() && !inputs_alike {
        mercury_bench::outln!(
            "note: torch's inputs were drawn as {}, ours as {OUR_INPUTS}: at the power limit the clocks follow the data's bits (1-3%), so a ratio marked 'inputs unalike' is not a comparison within that (run scripts/sdpa_baseline.py --inputs {OUR_INPUTS})",
            sdpa.inputs
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
            "regime": format!("{:?}", args.regime),
            "inputs": OUR_INPUTS,
            "rows": rows.iter().map(|r| serde_json::json!({
                "id": r.id, "median_ms": r.median_ms, "min_ms": r.min_ms,
                "tflops": r.tflops, "check": r.check, "pass": r.pass,
            })).collect::<Vec<_>>(),
        });
        if let Err(e) = std::fs::write(path, j.to_string()) {
            // The rows are not where the caller looks for them: a failed run.
            eprintln!(
                "mercury-gpu-bench: error: cannot write --json-out '{}': {e}",
                path.display()
            );
            failed += 1;
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        <Args as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn an_sdpa_file_records_its_regime_and_inputs_and_old_files_drew_bf16_grid_inputs() {
        let dir = std::env::temp_dir().join(format!("sdpa-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            load_sdpa(&p).unwrap()
        };
        let row = r#"{"id": "b1h32s32k.causal", "backend": "CUDNN_ATTENTION", "ms": 14.8}"#;
        let new = load(
            "new.json",
            &format!(r#"{{"regime": "sustained=1500", "inputs": "f32-rand", "results": [{row}]}}"#),
        );
        assert_eq!(new.inputs, OUR_INPUTS);
        assert_eq!(new.regime, Some("sustained=1500".parse().unwrap()));
        assert_eq!(
            new.ms[&("b1h32s32k.causal".into(), "CUDNN_ATTENTION".into())],
            14.8
        );
        let old = load("old.json", &format!(r#"{{"results": [{row}]}}"#));
        assert_eq!((old.inputs.as_str(), old.regime), ("bf16-rand", None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sections_are_read_in_any_case_and_every_one_runs_by_default() {
        let only = |argv: &[&str]| {
            Args::try_parse_from(argv)
                .map(|a| a.sections().iter().map(|s| s.name).collect::<Vec<_>>())
        };
        assert_eq!(
            only(&["b"]).unwrap(),
            ["P0", "P1", "P2", "P2c", "P2b", "P3"]
        );
        assert_eq!(only(&["b", "--only", "p2c,P3"]).unwrap(), ["P2c", "P3"]);
        assert_eq!(only(&["b", "--only", "P3,p0"]).unwrap(), ["P0", "P3"]);
        assert!(only(&["b", "--only", "P0,,P1"]).is_err());
        assert!(only(&["b", "--only", ""]).is_err());
    }
}
