//! mercury-tune: rank candidate schedules of one operator with the Mercury cost model.
//!
//! ```text
//! mercury-tune FILE --topology PRESET|FILE --out DIR [--profile-top K] [--no-search] [--cache DIR]
//! ```
//! FILE is a CommIR operator (`.mlir`) or an operator description (`.toml`, see
//! `mercury_search::operator::OperatorSpec`: an attention or GEMM shape, written into the
//! matching example operator): for both the candidates come from the CommIR generator
//! (`mercury_search::commir_source`). Or plans as JSON (`.json`: one plan, a list of plans or
//! a list of candidates); see [`source_for_file`].

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mercury_search::operator::OperatorSpec;
use mercury_search::report::{fmt_s, write_outputs};
use mercury_search::search::{
    tune, CandidateSource, PlanListSource, Progress, SourceError, TuneError, TuneOptions,
};
use mercury_search::topology::Topology;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "mercury-tune",
    version,
    about = "Rank candidate multi-GPU schedules of an operator with the Mercury cost model",
    after_help = "Topology presets: h100-1x4 h100-2x2 h100-4x1 h100-1x8 h100-2x4 h100-4x2 h100-4x4 h100-2x8 a100-2x4 l4-2x4 h200-1x8 (or a TOML file, see docs/topology.md)"
)]
struct Args {
    /// Operator file: `.mlir` CommIR operator or `.toml` operator description (candidates from
    /// the CommIR generator), or `.json` plans/candidates.
    file: PathBuf,
    /// Topology preset name or TOML file.
    #[arg(long)]
    topology: String,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Profile the best K candidates on the GPU (needs a profiler; none in this build).
    #[arg(long, default_value_t = 0)]
    profile_top: usize,
    /// Do not search: use the cache, else the source's default schedule.
    #[arg(long)]
    no_search: bool,
    /// Schedule cache directory.
    #[arg(long)]
    cache: Option<PathBuf>,
}

/// Picks the candidate source for an operator file by its extension.
fn source_for_file(path: &Path) -> Result<Box<dyn CandidateSource>, SourceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SourceError::new(format!("cannot read '{}': {e}", path.display())))?;
    let origin = path.display().to_string();
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => Ok(Box::new(OperatorSpec::parse(&text, &origin)?.source()?)),
        Some("json") => Ok(Box::new(PlanListSource::from_json(&text, &origin)?)),
        Some("mlir") => Ok(Box::new(
            mercury_search::commir_source::CommirSource::from_text(&text, &origin, None)?,
        )),
        _ => Err(SourceError::new(format!(
            "{origin}: unknown operator file type (expected .toml, .json or .mlir)"
        ))),
    }
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&mut self, what: &str, len: Option<u64>) {
        if let Some(l) = len {
            self.0.set_length(l);
        }
        self.0.set_message(what.to_string());
    }
    fn tick(&mut self, name: &str) {
        self.0.inc(1);
        self.0.set_message(name.to_string());
    }
    fn finish(&mut self) {
        self.0.finish_and_clear();
    }
}

fn run(args: &Args) -> Result<(), (ExitCode, String)> {
    let bad = |e: String| (ExitCode::from(1), e);
    let topo = Topology::load(&args.topology).map_err(|e| bad(e.to_string()))?;
    let mut source = source_for_file(&args.file).map_err(|e| bad(e.to_string()))?;
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new_spinner();
        b.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {pos} candidates {msg}") {
            b.set_style(style);
        }
        b
    } else {
        ProgressBar::hidden()
    };
    let mut progress = Bar(bar);
    let opts = TuneOptions {
        profile_top: args.profile_top,
        no_search: args.no_search,
        cache_dir: args.cache.clone(),
    };
    let res = tune(source.as_mut(), &topo, &opts, None, &mut progress).map_err(|e| match e {
        TuneError::NoFeasible { .. } => (ExitCode::from(2), e.to_string()),
        other => bad(other.to_string()),
    })?;
    for w in &res.report.warnings {
        eprintln!("warning: {w}");
    }
    for w in &res.report.source_errors {
        eprintln!("warning: candidate skipped: {w}");
    }
    let written = write_outputs(&res, &topo, &args.out).map_err(|e| {
        bad(format!(
            "cannot write outputs to '{}': {e}",
            args.out.display()
        ))
    })?;
    let c = &res.ranked[res.chosen];
    let r = &res.report;
    println!("operator:  {}", r.operator);
    println!("topology:  {} — {}", topo.name, topo.summary());
    println!(
        "chosen:    {} — predicted {}, {:.2} GB per device ({})",
        c.candidate.name,
        fmt_s(c.predicted_s),
        c.peak_bytes() as f64 / 1e9,
        r.decision
    );
    println!(
        "searched:  {} seen, {} invalid, {} over memory, {} simulated, {} profiled; cache {}",
        r.candidates_seen, r.invalid, r.pruned_memory, r.simulated, r.profiled, r.cache
    );
    println!(
        "frontier:  {}",
        res.frontier
            .iter()
            .map(|&i| format!(
                "{} ({}, {:.1} GB)",
                res.ranked[i].candidate.name,
                fmt_s(res.ranked[i].latency()),
                res.ranked[i].peak_bytes() as f64 / 1e9
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "time:      first usable after {}, total {}",
        fmt_s(r.time_to_first_usable_s),
        fmt_s(Some(r.total_s))
    );
    println!("wrote {} files to {}", written.len(), args.out.display());
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("mercury-tune: error: {msg}");
            code
        }
    }
}
