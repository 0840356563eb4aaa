//! mercury-tune: rank candidate schedules of one operator with the Mercury cost model, and
//! profile the best of them on the machine.
//!
//! ```text
//! mercury-tune FILE --topology PRESET|FILE --out DIR [--profile-top K [--backend cuda|cpu]
//!     [--virtual] [--devices N] [--transport peer|nccl] [--launcher env] ...] [--refactor-mesh]
//!     [--max-mesh-levels N] [--no-search] [--cache DIR] [--kernel NAME]
//! ```
//! `--kernel NAME` picks the kernel of a `.mlir` file holding several; its schedule then
//! applies with `mercury-run FILE --kernel NAME --schedule DIR/schedule.transform`.
//! `--profile-top K` compiles the model's K best candidates and runs each checked
//! (`cuda`: mercury-run's `--check --bench` code on the GPUs, exit 2 without one; `cpu`: the
//! f64 reference executor, for small shapes and tests), picks the measured best and stores it
//! in the cache with its measured time. With `--launcher env` every process of a launched run
//! (torchrun, srun, mpirun: one per GPU or node) runs the same search and profiles the same
//! candidates together (a candidate's time is the slowest process's); process 0 writes the
//! outputs. Output files: see README.md ("mercury-tune").
//! FILE is a CommIR operator (`.mlir`) or an operator description (`.toml`, see
//! `mercury_search::operator::OperatorSpec`: an attention or GEMM shape, written into the
//! matching example operator): for both the candidates come from the CommIR generator
//! (`mercury_search::commir_source`). Or plans as JSON (`.json`: one plan, a list of plans or
//! a list of candidates); see [`source_for_file`].

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mercury::auto::{operator_source, SourceKind, TuneSource};
use mercury_search::profile::{CpuMeasure, Measure};
use mercury_search::report::{fmt_s, write_outputs};
use mercury_search::search::{tune, Progress, SourceError, TuneError, TuneOptions};
use mercury_search::templates::template_of;
use mercury_search::topology::{Topology, TopologyError};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
mod launched;
mod module;

/// Timed runs per profiled candidate unless `--iters` says otherwise.
const ITERS: usize = 10;
/// Untimed warm-up runs per profiled candidate unless `--warmup` says otherwise.
const WARMUP: usize = 3;

/// The measuring backend of `--profile-top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendArg {
    /// The GPUs, through mercury-run's checked benchmark (the flags below place the ranks).
    Cuda,
    /// The f64 CPU reference executor (small shapes; its times are not GPU times: for tests).
    Cpu,
}

/// Where the processes of a launched profiling run come from (`--launcher`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LauncherArg {
    /// torchrun/srun/mpirun style environment (as mercury-run --launcher env).
    Env,
}

#[derive(clap::Parser, Debug)]
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
    /// The kernel to tune when a `.mlir` file holds several: the schedule's passes transform
    /// it alone, and `schedule.transform` applies to the file with `mercury-run --kernel NAME`.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Run the model's best K candidates checked on the machine and pick the measured best.
    #[arg(long, default_value_t = 0, value_name = "K")]
    profile_top: usize,
    /// Where --profile-top measures.
    #[arg(long, value_enum, default_value_t = BackendArg::Cuda)]
    backend: BackendArg,
    /// GPU profiling: run several ranks per GPU as virtual ranks (as mercury-run --virtual).
    #[arg(long = "virtual")]
    virtual_ranks: bool,
    /// GPU profiling: GPUs to use (as mercury-run --devices).
    #[arg(long, value_name = "N")]
    devices: Option<usize>,
    /// GPU profiling: peer or nccl (as mercury-run --transport).
    #[arg(long, value_name = "KIND")]
    transport: Option<String>,
    /// GPU profiling in every process of a launched run (as mercury-run --launcher env): all
    /// processes search alike and run each profiled candidate together; a candidate's time is
    /// the slowest process's; process 0 writes the outputs. Not with --cache.
    #[arg(long, value_enum, value_name = "KIND")]
    launcher: Option<LauncherArg>,
    /// GPU profiling: cudnn or nvrtc attention (as mercury-run --attention).
    #[arg(long, value_name = "KIND")]
    attention: Option<String>,
    /// GPU profiling: the device kernels' PTX (as mercury-run --device-kernels).
    #[arg(long, value_name = "FILE")]
    device_kernels: Option<PathBuf>,
    /// GPU profiling: the limit of a blocking setup step in seconds (as mercury-run
    /// --setup-timeout; under --launcher also how far apart the processes may finish the
    /// search, since they join at the first candidate).
    #[arg(long, value_name = "SECS")]
    setup_timeout: Option<f64>,
    /// Timed runs per profiled candidate (median reported).
    #[arg(long, default_value_t = ITERS)]
    iters: usize,
    /// Untimed warm-up runs per profiled candidate.
    #[arg(long, default_value_t = WARMUP)]
    warmup: usize,
    /// Largest relative error a profiled candidate's check accepts, a positive finite number
    /// (default: mercury-run's, 2e-2 on the GPU; 1e-9 on the CPU).
    #[arg(long, value_parser = mercury_search::profile::parse_tolerance, allow_hyphen_values = true)]
    tolerance: Option<f64>,
    /// Re-factor a `.mlir` operator's mesh: every factorisation of the topology's devices into
    /// levels (the transform then starts with `reshape-mesh`). Default: the declared mesh.
    #[arg(long)]
    refactor_mesh: bool,
    /// Re-factored meshes of at most N levels (`.toml` operators, `.mlir` with
    /// --refactor-mesh). Default: as many levels as keep the candidates times the devices
    /// squared within mercury_search::commir_source::ENUMERATION_BUDGET (every mesh up to 16 devices;
    /// a warning says what was left out).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_mesh_levels: Option<u32>,
    /// Do not search: use the cache, else the source's default schedule.
    #[arg(long)]
    no_search: bool,
    /// Schedule cache directory.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Search a `.mlir` module of several kernels as one layer: every kernel's schedule and
    /// every edge's placement together (writes DIR/layer.sched for `mercury-run --module`).
    #[arg(long)]
    module: bool,
    /// With --module: the model's layers whose weights every device keeps (the memory cap
    /// charges the module's weights this many times).
    #[arg(long, value_name = "N", requires = "module", value_parser = clap::value_parser!(u64).range(1..))]
    layers: Option<u64>,
}

/// The candidate source of an operator file (by its extension: the library face's
/// [`mercury::auto::operator_source`], which `schedule="auto"` uses too).
fn source_for_file(
    path: &Path,
    refactor_mesh: bool,
    max_levels: Option<usize>,
    kernel: Option<&str>,
    devices: usize,
) -> Result<TuneSource, SourceError> {
    let origin = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str());
    let text = std::fs::read_to_string(path)
        .map_err(|e| SourceError::new(format!("cannot read '{}': {e}", path.display())))?;
    let Some(kind) = SourceKind::of_extension(ext) else {
        return Err(SourceError::new(format!(
            "{origin}: unknown operator file type (expected .toml, .json or .mlir)"
        )));
    };
    operator_source(
        &text,
        &origin,
        kind,
        refactor_mesh,
        max_levels,
        kernel,
        devices,
    )
}

/// Why a run failed: its exit status and the complete message, either `mercury-tune: error:
/// ...` or a located diagnostic as it stands (`file:line:col: error: ...`, the source line and
/// a caret, as mercury-opt prints it).
struct Failure {
    code: ExitCode,
    text: String,
}

impl Failure {
    /// `mercury-tune: error: <msg>`, exit `code`.
    fn new(code: u8, msg: impl std::fmt::Display) -> Failure {
        Failure {
            code: ExitCode::from(code),
            text: format!("mercury-tune: error: {msg}"),
        }
    }

    /// Bad input (exit 1) from the candidate source: a located diagnostic as it stands.
    fn source(e: SourceError) -> Failure {
        if e.located {
            Failure {
                code: ExitCode::from(1),
                text: e.message,
            }
        } else {
            Failure::new(1, e)
        }
    }
}

/// mercury-run's flags for the GPU backend, from ours.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn run_flags(args: &Args) -> Vec<String> {
    let mut f = vec![
        "--iters".to_string(),
        args.iters.to_string(),
        "--warmup".to_string(),
        args.warmup.to_string(),
    ];
    if args.virtual_ranks {
        f.push("--virtual".into());
    }
    if let Some(d) = args.devices {
        f.extend(["--devices".into(), d.to_string()]);
    }
    if let Some(t) = &args.transport {
        f.extend(["--transport".into(), t.clone()]);
    }
    if args.launcher.is_some() {
        f.extend(["--launcher".into(), "env".into()]);
    }
    if let Some(a) = &args.attention {
        f.extend(["--attention".into(), a.clone()]);
    }
    if let Some(p) = &args.device_kernels {
        f.extend(["--device-kernels".into(), p.display().to_string()]);
    }
    if let Some(t) = args.tolerance {
        f.extend(["--tolerance".into(), t.to_string()]);
    }
    if let Some(t) = args.setup_timeout {
        f.extend(["--setup-timeout".into(), t.to_string()]);
    }
    f
}

/// The measuring backend of `--profile-top`; a failure of exit status 2 when the GPU backend
/// has no GPU (never a silent fallback), 1 for unusable input.
fn measure_backend(
    args: &Args,
    op: &mut TuneSource,
    topo: &Topology,
) -> Result<Box<dyn Measure>, Failure> {
    let reference = match op.reference.take() {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(Failure::source(e)),
        None => {
            return Err(Failure::new(
                1,
                format!(
                    "--profile-top needs a CommIR or .toml operator (its single-device reference checks every measured candidate); '{}' gives plans only",
                    args.file.display()
                ),
            ))
        }
    };
    match args.backend {
        BackendArg::Cpu => {
            let mut m = CpuMeasure::new(reference);
            if let Some(t) = args.tolerance {
                m.tolerance = t;
            }
            m.iters = args.iters;
            Ok(Box::new(m))
        }
        BackendArg::Cuda => {
            #[cfg(feature = "cuda")]
            {
                // Bad or conflicting flags are bad input (exit 1), found before the GPU probe.
                cuda::check_run_flags(&run_flags(args)).map_err(|e| Failure::new(1, e))?;
                let m = if args.launcher.is_some() {
                    launched::LaunchedMeasure::new(&run_flags(args), reference, topo)
                        .map(|m| Box::new(m) as Box<dyn Measure>)
                } else {
                    cuda::CudaMeasure::new(&run_flags(args), reference, topo)
                        .map(|m| Box::new(m) as Box<dyn Measure>)
                };
                m.map_err(|e| {
                        Failure::new(
                            2,
                            format!("--profile-top {} --backend cuda: {e}; nothing was profiled (no fallback to the model)", args.profile_top),
                        )
                    })
            }
            #[cfg(not(feature = "cuda"))]
            {
                let _ = topo;
                Err(Failure::new(
                    2,
                    "--backend cuda: this build has no CUDA backend (rebuild with --features cuda)",
                ))
            }
        }
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

/// `--launcher` needs profiling on the GPUs, and no cache: every process must take the same
/// path through the search, and only process 0 writes. Returns this process's rank among the
/// launcher's processes (0 without `--launcher`).
fn check_launcher(args: &Args) -> Result<usize, String> {
    if args.launcher.is_none() {
        return Ok(0);
    }
    if args.profile_top == 0 || args.backend != BackendArg::Cuda {
        return Err("--launcher runs --profile-top K on the GPUs in several processes: it needs --profile-top and --backend cuda".into());
    }
    if args.cache.is_some() {
        return Err("--launcher does not take --cache: only process 0 would write it, and on a later run the processes would take different paths (a cache hit here, a search there)".into());
    }
    if args.no_search {
        return Err(
            "--launcher profiles the search's candidates; it does not take --no-search".into(),
        );
    }
    // The launcher's environment now, not after the search.
    #[cfg(feature = "cuda")]
    match mercury_runtime::cuda::launcher::LaunchEnv::from_env() {
        Ok(Some(env)) => Ok(env.rank),
        Ok(None) => Err("--launcher env: RANK and WORLD_SIZE are not set (start every process with torchrun, srun or mpirun; docs/multi-gpu.md)".into()),
        Err(e) => Err(format!("--launcher env: {e}")),
    }
    // Without CUDA profiling is refused later (exit 2); no process but this one.
    #[cfg(not(feature = "cuda"))]
    Ok(0)
}

/// The profiling flags that would be read by nothing: without `--profile-top` nothing is
/// measured; under `--backend cpu` the GPU backend's flags have no reader (mercury-run refuses
/// them there the same way); `--iters 0` times nothing.
fn check_profile_flags(args: &Args) -> Result<(), String> {
    if args.iters == 0 {
        return Err("--iters must be at least 1: a profiled candidate's time is the median of its timed runs".into());
    }
    let gpu_only: Vec<&str> = [
        ("--virtual", args.virtual_ranks),
        ("--devices", args.devices.is_some()),
        ("--transport", args.transport.is_some()),
        ("--attention", args.attention.is_some()),
        ("--device-kernels", args.device_kernels.is_some()),
        ("--setup-timeout", args.setup_timeout.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, given)| given.then_some(f))
    .collect();
    if args.profile_top == 0 {
        let mut given = gpu_only.clone();
        for (f, g) in [
            ("--backend cpu", args.backend == BackendArg::Cpu),
            ("--tolerance", args.tolerance.is_some()),
            ("--iters", args.iters != ITERS),
            ("--warmup", args.warmup != WARMUP),
        ] {
            if g {
                given.push(f);
            }
        }
        if !given.is_empty() {
            return Err(format!(
                "{} only {} what --profile-top K measures, and without it nothing is profiled: add --profile-top K, or drop {}",
                given.join(", "),
                if given.len() == 1 { "sets" } else { "set" },
                if given.len() == 1 { "it" } else { "them" }
            ));
        }
    }
    if args.backend == BackendArg::Cpu && !gpu_only.is_empty() {
        return Err(format!(
            "--backend cpu does not read {} (GPU backend {}): the CPU executor runs every rank in one process; drop {}, or profile with --backend cuda",
            gpu_only.join(", "),
            if gpu_only.len() == 1 { "flag" } else { "flags" },
            if gpu_only.len() == 1 { "it" } else { "them" }
        ));
    }
    Ok(())
}

fn run(args: &Args) -> Result<(), Failure> {
    let bad = |e: String| Failure::new(1, e);
    check_profile_flags(args).map_err(bad)?;
    let process = check_launcher(args).map_err(bad)?;
    if let Some(c) = args.cache.as_ref().filter(|c| c.exists() && !c.is_dir()) {
        return Err(bad(format!(
            "--cache: '{}' is not a directory (the schedule cache is a directory of entries)",
            c.display()
        )));
    }
    let topo = Topology::load(&args.topology).map_err(|e| match e {
        // A located error in the file, as it stands.
        TopologyError::Located(d) => Failure {
            code: ExitCode::from(1),
            text: d.render(),
        },
        e => bad(e.to_string()),
    })?;
    if args.module {
        return module::run(args, &topo);
    }
    let mut op = source_for_file(
        &args.file,
        args.refactor_mesh,
        args.max_mesh_levels.map(|n| n as usize),
        args.kernel.as_deref(),
        topo.num_devices(),
    )
    .map_err(Failure::source)?;
    // The device first: without one, say so before searching (exit 2).
    let mut measure = if args.profile_top > 0 {
        Some(measure_backend(args, &mut op, &topo)?)
    } else {
        None
    };
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
    let res = tune(
        op.source.as_mut(),
        &topo,
        &opts,
        measure.as_mut().map(|m| &mut **m as &mut dyn Measure),
        &mut progress,
    )
    .map_err(|e| match e {
        TuneError::NoFeasible { .. } | TuneError::NoDevice(_) => Failure::new(2, e),
        TuneError::Source(e) if e.located => Failure::source(e),
        other => bad(other.to_string()),
    })?;
    for w in &res.report.warnings {
        eprintln!("warning: {w}");
    }
    let mut written = Vec::new();
    if process == 0 {
        written = write_outputs(&res, &topo, &args.out).map_err(|e| {
            bad(format!(
                "cannot write outputs to '{}': {e}",
                args.out.display()
            ))
        })?;
    }
    if let (0, Some(text)) = (process, &op.generated_text) {
        let p = args.out.join("operator.mlir");
        std::fs::write(&p, text)
            .map_err(|e| bad(format!("cannot write '{}': {e}", p.display())))?;
        written.push(p);
    }
    let c = &res.ranked[res.chosen];
    let r = &res.report;
    println!("operator:  {}", r.operator);
    println!("topology:  {} — {}", topo.name, topo.summary());
    println!(
        "chosen:    {} — predicted {}, measured {}, {:.2} GB per device ({})",
        c.candidate.name,
        fmt_s(c.predicted_s),
        fmt_s(c.measured_s),
        c.peak_bytes() as f64 / 1e9,
        r.decision
    );
    println!(
        "schedule:  {}",
        template_of(&c.candidate.name)
            .map(|t| format!("known template: {t}"))
            .unwrap_or_else(|| "new schedule (no known template)".into())
    );
    println!(
        "searched:  {} seen, {} invalid, {} over memory, {} simulated, {} profiled; cache {}",
        r.candidates_seen, r.invalid, r.pruned_memory, r.simulated, r.profiled, r.cache
    );
    if !r.skipped.is_empty() {
        let n: usize = r.skipped.iter().map(|s| s.1).sum();
        println!("skipped:   {n} candidate(s) the primitives or the lowering refused, by reason:");
        for (why, k) in &r.skipped {
            println!("  {k:>4} x {why}");
        }
    }
    if let Some(p) = &r.profile {
        println!("profile:   {}", p.backend);
        for row in &p.rows {
            println!(
                "  model #{:<3} {:<44} predicted {:>10}  measured {:>10}  {}",
                row.model_rank,
                row.name,
                fmt_s(Some(row.predicted_s)),
                fmt_s(row.measured_s),
                match (&row.failure, &row.template) {
                    (Some(f), _) => format!("DROPPED: {f}"),
                    (None, Some(t)) => format!("[{t}]"),
                    (None, None) => "[new schedule]".into(),
                }
            );
        }
        println!(
            "  model pick {} | measured pick {} | within 5%: {} | Kendall tau {} | median |predicted/measured - 1| {} | {} {:.3} s",
            p.model_pick,
            p.measured_pick.as_deref().unwrap_or("-"),
            match p.model_pick_within(0.05) {
                Some(true) => "yes".to_string(),
                Some(false) => format!(
                    "no ({:.1}% slower)",
                    (p.model_pick_slowdown.unwrap_or(1.0) - 1.0) * 100.0
                ),
                None => "- (the model's pick failed)".into(),
            },
            p.kendall_tau
                .map(|t| format!("{t:.2}"))
                .unwrap_or_else(|| "-".into()),
            p.median_abs_error
                .map(|e| format!("{:.0}%", e * 100.0))
                .unwrap_or_else(|| "-".into()),
            if p.on_gpu { "GPU-seconds" } else { "CPU-seconds (no GPU used)" },
            p.device_seconds
        );
    }
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
        "time:      first usable after {}, total {}; GPU-seconds profiling {:.3}",
        fmt_s(r.time_to_first_usable_s),
        fmt_s(Some(r.total_s)),
        r.gpu_seconds
    );
    if let Some(f) = &r.cache_file {
        println!("cache:     {f} (mercury-run --cache-file checks a later run against its measured time)");
    }
    if let Some(k) = &args.kernel {
        println!(
            "apply:     mercury-run {} --kernel {} --schedule {} (the other kernels of the file stay as they are)",
            args.file.display(),
            k.trim_start_matches('@'),
            args.out.join("schedule.transform").display()
        );
    }
    if process == 0 {
        println!("wrote {} files to {}", written.len(), args.out.display());
    } else {
        println!("wrote nothing: process 0 of the launched run writes the outputs");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Args = match mercury_driver::cli::parse() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("{}", f.text.trim_end());
            f.code
        }
    }
}
