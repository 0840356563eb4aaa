//! Command-line arguments.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The f64 CPU reference executor (small shapes).
    Cpu,
    /// The GPU (CUDA through cudarc, loaded at run time).
    Cuda,
}

/// How ranks on different GPUs exchange data (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Copy-engine peer copies between GPUs (cuMemcpyPeerAsync over NVLink) and the combine
    /// kernels; device copies between ranks on one GPU.
    Peer,
    /// NCCL: one communicator per collective group (one process), or the launcher's world
    /// split per group (--launcher env); groups whose ranks share a GPU use device copies.
    Nccl,
}

/// Which attention patch the GPU backend uses (`--attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttentionArg {
    /// cuDNN fused attention (found through MERCURY_CUDNN_LIB, the loader, or the nvidia-cudnn
    /// Python package); the NVRTC kernel for blocks cuDNN refuses, with a warning.
    Cudnn,
    /// The NVRTC FlashAttention-2-style kernel (head dim 128 only).
    Nvrtc,
}

/// Where the processes of a multi-process run come from (`--launcher`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LauncherArg {
    /// torchrun/srun/mpirun style: RANK, WORLD_SIZE, LOCAL_RANK and MERCURY_NCCL_ID_FILE,
    /// NCCL_COMM_ID or MASTER_ADDR/MASTER_PORT from the environment (docs/multi-gpu.md).
    Env,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "mercury-run",
    version,
    about = "Compile a CommIR operator with a schedule and run it (CPU reference executor or GPUs)"
)]
pub struct Args {
    /// The CommIR file (an operator with its mesh).
    pub input: PathBuf,
    /// A schedule script (one primitive per line, as in examples/schedules).
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// A pass pipeline applied after the schedule script.
    #[arg(long, value_name = "PIPELINE")]
    pub pass_pipeline: Option<String>,
    /// Apply the shift-shard schedule first; its options as in mercury-opt
    /// (`--shift-shard="balance=false"`, `mercury-opt --list-passes`).
    #[arg(long)]
    pub shift_shard: Option<String>,
    /// The kernel to schedule and run when the input has several: the schedule's passes
    /// transform it alone (those that do not name a kernel with their own option).
    #[arg(long)]
    pub kernel: Option<String>,
    /// A training step: run the forward (the kernel --kernel names, or the input's other
    /// kernel) and then its backward, the kernel NAME. The backward's inputs named as a
    /// forward buffer come from the forward (its inputs; its outputs, such as O and the
    /// log-sum-exp it keeps), and must be declared alike in both (shape, element type,
    /// placement: the forward leaves them where the backward reads them); the others (the
    /// loss's gradient dO) are fresh random inputs. --schedule, --shift-shard and
    /// --pass-pipeline schedule both kernels (a pass with its own kernel option, its kernel);
    /// --backward-schedule gives the backward a script of its own. --check holds the
    /// forward's and the backward's outputs (dQ, dK, dV) to the single-device step. CPU
    /// backend.
    #[arg(long, value_name = "NAME")]
    pub backward: Option<String>,
    /// With --backward: the backward's schedule script (the forward keeps --schedule,
    /// --shift-shard and --pass-pipeline).
    #[arg(long, value_name = "FILE", requires = "backward")]
    pub backward_schedule: Option<PathBuf>,
    /// Run every kernel of the input in module order as one program (a decoder layer):
    /// a kernel's input named as an earlier kernel's output is that output, resharded at the
    /// reader's start where the two placements differ (the `reshard-edges` pass); the other
    /// inputs are fresh random values shared by every kernel that reads them. --schedule is
    /// one script for the module (a pass with `kernel=NAME` transforms that kernel, one
    /// without transforms every kernel). --check holds every kernel's outputs to the
    /// single-device module in f64. CPU backend.
    #[arg(long, conflicts_with_all = ["kernel", "backward", "shift_shard", "pass_pipeline"])]
    pub module: bool,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Cuda)]
    pub backend: Backend,
    /// Run several ranks per GPU as virtual ranks (each its own memory and streams; transfers
    /// between them are device copies): all on GPU 0, or rank r on GPU r % N with --devices N.
    #[arg(long = "virtual")]
    pub virtual_ranks: bool,
    /// GPUs to use (default: every visible GPU; with --virtual and no --devices, GPU 0 only).
    /// Without --virtual rank r runs on GPU r, and a plan with more ranks than GPUs is refused.
    #[arg(long, value_name = "N")]
    pub devices: Option<usize>,
    /// Test the multi-GPU paths on one GPU: K device ids, all on GPU 0, rank r on id r % K.
    /// Each id gets its own context resources, and copies between ids take the peer-copy
    /// paths (`cuMemcpyPeerAsync`, groups spanning devices pull their chunks) exactly as
    /// between K GPUs. Times are one GPU's, not K GPUs'. Needs --transport peer; does not take
    /// --devices, --virtual or --launcher.
    #[arg(long, value_name = "K")]
    pub alias: Option<usize>,
    /// How ranks on different GPUs exchange data.
    #[arg(long, value_enum, default_value_t = TransportArg::Peer)]
    pub transport: TransportArg,
    /// One process per GPU or node, started by a launcher (implies --transport nccl); every
    /// process needs the same --seed (default 1 in this mode). With --virtual, a process's
    /// ranks share one GPU and the processes talk through one NCCL rank each (two tiers:
    /// docs/multi-gpu.md).
    #[arg(long, value_enum, value_name = "KIND")]
    pub launcher: Option<LauncherArg>,
    /// Attention patch of the GPU backend (schedule and reference alike).
    #[arg(long, value_enum, default_value_t = AttentionArg::Cudnn)]
    pub attention: AttentionArg,
    /// GPU backend: read inputs and write outputs only through the ranks' slots (no direct
    /// binding of cuDNN blocks to the global buffers; to measure what it saves).
    #[arg(long)]
    pub no_direct_binding: bool,
    /// Number of ranks expected (checked against the mesh).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Compare with the single-device reference on fresh random inputs: per output,
    /// ‖got − want‖ / ‖want‖ within the tolerance, and every element within 10 times the
    /// tolerance of (rms + |want|), rms the output's root mean square (a few wrong elements of
    /// a large output hide in the norm).
    #[arg(long)]
    pub check: bool,
    /// GPU backend: time the schedule and the single-device reference side by side (the CPU
    /// backend refuses it: its times are not GPU times).
    #[arg(long)]
    pub bench: bool,
    /// With an input that is already scheduled (a loop `parallel` or `shift`): let `--check`
    /// hold it to the same IR on one device, its loops in turn. That reference shares the
    /// lowering of the tiled body, so the check then covers the distribution (communication,
    /// placement), not the body's lowering. Without it, `--check` refuses such an input.
    #[arg(long)]
    pub self_reference: bool,
    /// Timed repetitions (median reported).
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Untimed warm-up runs.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Seed of the random inputs (default: a fresh one every run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Reorder the run's packed documents (drawn, or given with `--documents`) so that the
    /// ranks holding the queries' shards do about the same attention work
    /// (`mercury_plan::balance`); prints busiest rank / mean before and after. The plan and
    /// the `--check` reference take the reordered boundaries.
    #[arg(long)]
    pub balance_documents: bool,
    /// GPU backend: the document boundaries of a `commir.documents` input, `NAME=FILE` (FILE:
    /// the prefix sums, flash-attn's cu_seqlens, as whole numbers separated by commas or
    /// white space), instead of fresh random ones; repeat it for each input.
    #[arg(long, value_name = "NAME=FILE")]
    pub documents: Vec<String>,
    /// Largest relative error `--check` accepts, a positive finite number (default: 1e-9 on
    /// the CPU, 2e-2 on the GPU). The CPU's second check, with every value stored in its dtype,
    /// holds the GPU's 2e-2.
    #[arg(long, value_parser = mercury_search::profile::parse_tolerance, allow_hyphen_values = true)]
    pub tolerance: Option<f64>,
    /// The device kernels' PTX (from `mercury-opt --emit=ptx --all-device-kernels`) instead of
    /// compiling it here. The runtime needs every one of its kernels: a PTX without some is
    /// refused, naming them (the plan-specific `--emit=ptx` leaves out the ones its plan does
    /// not use).
    #[arg(long, value_name = "FILE")]
    pub device_kernels: Option<PathBuf>,
    /// A schedule cache entry (a file in `mercury-tune --cache DIR`) whose chosen schedule this
    /// run compiles: the run's time (the `--bench` median on the GPU, the executor's time on the
    /// CPU) is compared with the entry's measured time, and a run more than 20% slower marks
    /// the entry suspect (mercury-tune then tunes again; without profiling it uses the model's
    /// pick). The compiled plan must be the entry's. Under a launcher the slowest process's
    /// median counts and process 0 alone marks the entry.
    #[arg(long, value_name = "FILE")]
    pub cache_file: Option<PathBuf>,
    /// Write the lowered plan as JSON.
    #[arg(long, value_name = "FILE")]
    pub emit_plan: Option<PathBuf>,
    /// The cost model's time for the compiled plan on this topology (a preset name or a TOML
    /// file, e.g. one `mercury-mgpu links` wrote), printed before the run; after a GPU
    /// `--bench` also the measured median beside it and the error, predicted / measured - 1
    /// (under a launcher: process 0, against the slowest process's median).
    #[arg(long, value_name = "TOPOLOGY")]
    pub predict: Option<String>,
    /// With `--predict`: write the model's timeline of the plan as a Chrome / Perfetto trace
    /// (JSON, microseconds; a process per rank, a thread for the compute stream and one per
    /// transfer of a stage, every op's FLOPs and bytes in its args): where the predicted time
    /// goes.
    #[arg(long, value_name = "FILE", requires = "predict")]
    pub predict_trace: Option<PathBuf>,
    /// Compile and lower only: print the comm plan and memory (and `--predict`, `--emit-plan`),
    /// run nothing (no device needed). Not with --check, --bench, --cache-file, --launcher or
    /// --inject-fault.
    #[arg(long)]
    pub no_run: bool,
    /// GPU backend: a run in which no stream finishes its work of a stage for this many
    /// seconds ends every process with "error: rank R (pid, GPU g) stage S/N: no progress ..."
    /// and exit status 1 (NCCL communicators aborted first). From 0.001 to 1e6.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub stage_timeout: f64,
    /// GPU backend: limit of a blocking setup step (NCCL bootstrap, communicator split) before
    /// the process gives up with the same kind of report. From 0.001 to 1e6.
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    pub setup_timeout: f64,
    /// GPU backend, tests of the fault handling: exit-rank=R@stage=S (the process of rank R
    /// kills itself with SIGKILL before stage S), hang-rank=R@stage=S (rank R's streams wait
    /// forever), host-hang-rank=R@stage=S (its host thread blocks forever); stages count from
    /// 1; the first run of the schedule only. Default: $MERCURY_INJECT_FAULT.
    #[arg(long, value_name = "FAULT")]
    pub inject_fault: Option<String>,
}

/// The arguments of this process (`parse_from` of its command line).
pub fn parse() -> Result<Args, clap::Error> {
    parse_from(std::env::args_os())
}

/// Parses and validates mercury-run's arguments from `argv` (the program name first):
/// clap's checks and the conflicts between flags (`--launcher` with `--backend cpu`, ...).
///
/// # Errors
/// The first bad or conflicting argument, as clap reports it.
pub fn parse_from<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    // --shift-shard takes its options as every tool's pass flag does (mercury_driver::cli).
    let m = Args::command()
        .mut_arg("shift_shard", mercury_driver::cli::pass_flag)
        .try_get_matches_from(argv)?;
    let a = Args::from_arg_matches(&m)?;
    if a.launcher.is_some() {
        if a.backend == Backend::Cpu {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                "--launcher starts the CUDA backend in several processes; the CPU backend runs every rank in one process (drop --launcher)\n",
            ));
        }
        // NCCL carries every transfer between processes: a peer transport asked for by name
        // cannot be honoured.
        let given = m.value_source("transport") == Some(clap::parser::ValueSource::CommandLine);
        if given && a.transport == TransportArg::Peer {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                "--launcher env talks between processes through NCCL; it does not take --transport peer\n",
            ));
        }
    }
    if a.backend == Backend::Cpu {
        // Flags only the GPU backend reads: under the CPU executor they would be ignored
        // silently.
        let given = given_flags(&m, GPU_PLACEMENT.iter().chain(&["inject_fault"]));
        if !given.is_empty() {
            let (flags, them) = (pick(&given, "flag", "flags"), pick(&given, "it", "them"));
            return Err(conflict(format!(
                "--backend cpu does not read {} (GPU backend {flags}): the CPU executor runs every rank in one process; drop {them}, or run with --backend cuda\n",
                given.join(", ")
            )));
        }
    }
    if a.no_run
        && (a.check
            || a.bench
            || a.cache_file.is_some()
            || a.launcher.is_some()
            || a.inject_fault.is_some())
    {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "--no-run compiles only; --check, --bench, --cache-file, --launcher and --inject-fault need a run\n",
        ));
    }
    if a.module {
        let one_plan = given_flags(
            &m,
            &["bench", "cache_file", "launcher", "emit_plan", "predict"],
        );
        if a.backend != Backend::Cpu {
            return Err(conflict(
                "--module runs a module of several kernels on the CPU executor (--backend cpu)\n"
                    .into(),
            ));
        }
        if !one_plan.is_empty() {
            return Err(conflict(format!(
                "--module runs a plan per kernel; {} read one plan: drop {}\n",
                one_plan.join(", "),
                pick(&one_plan, "it", "them")
            )));
        }
    }
    if a.backward.is_some() {
        let gpu_only = given_flags(
            &m,
            &["bench", "cache_file", "launcher", "emit_plan", "predict"],
        );
        if !gpu_only.is_empty() {
            return Err(conflict(format!(
                "--backward runs a training step of two plans; {} read one plan: drop {}\n",
                gpu_only.join(", "),
                pick(&gpu_only, "it", "them")
            )));
        }
    }
    if a.iters == 0 {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            "--iters must be at least 1\n",
        ));
    }
    // Flags that only set what another flag does: without it they would be read by nothing
    // (an eleventh new-user pass).
    let on_command_line =
        |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let timing = given_flags(&m, &["iters", "warmup"]);
    if !timing.is_empty() && !a.bench {
        let (sets, them) = (pick(&timing, "sets", "set"), pick(&timing, "it", "them"));
        return Err(conflict(format!(
            "{} only {sets} what --bench times, and without it the schedule runs once: add --bench, or drop {them}\n",
            timing.join(", ")
        )));
    }
    if a.bench && a.backend == Backend::Cpu {
        return Err(conflict(
            "--bench times the GPU backend: the CPU backend is the f64 reference executor, whose times are not GPU times (run with --backend cuda, or drop --bench)\n".into(),
        ));
    }
    if on_command_line("tolerance") && !a.check {
        return Err(conflict(
            "--tolerance sets what --check accepts, and there is no --check: add --check, or drop --tolerance\n".into(),
        ));
    }
    if a.no_run && on_command_line("seed") {
        return Err(conflict(
            "--no-run compiles only, and --seed sets a run's random inputs: drop it, or run\n"
                .into(),
        ));
    }
    if a.self_reference && !a.check {
        return Err(conflict(
            "--self-reference chooses the reference of --check, and there is no --check: add --check, or drop --self-reference\n".into(),
        ));
    }
    if a.no_run {
        let placement = given_flags(&m, GPU_PLACEMENT);
        if !placement.is_empty() {
            let (sets, them) = (
                pick(&placement, "sets", "set"),
                pick(&placement, "it", "them"),
            );
            return Err(conflict(format!(
                "--no-run compiles only, and {} only {sets} how a run is placed on the GPUs: drop {them}, or run\n",
                placement.join(", ")
            )));
        }
    }
    if a.devices == Some(0) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            "--devices must be at least 1\n",
        ));
    }
    if let Some(k) = a.alias {
        if k < 2 {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                "--alias must be at least 2 (one device id is the virtual mode: --virtual)\n",
            ));
        }
        let given: Vec<&str> = [
            (a.devices.is_some(), "--devices"),
            (a.virtual_ranks, "--virtual"),
            (a.launcher.is_some(), "--launcher"),
            (a.transport != TransportArg::Peer, "--transport nccl"),
        ]
        .iter()
        .filter(|(g, _)| *g)
        .map(|(_, f)| *f)
        .collect();
        if !given.is_empty() {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--alias places rank r on device id r % K, every id on GPU 0, with peer copies between ids; it does not take {}\n",
                    given.join(", ")
                ),
            ));
        }
    }
    if a.launcher.is_some() && a.virtual_ranks && a.devices.is_some() {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "--launcher with --virtual runs each process's ranks on one GPU (LOCAL_RANK modulo the visible GPUs); it does not take --devices\n",
        ));
    }
    for (flag, v) in [
        ("--stage-timeout", a.stage_timeout),
        ("--setup-timeout", a.setup_timeout),
    ] {
        if !(v.is_finite() && (TIMEOUT_MIN_S..=TIMEOUT_MAX_S).contains(&v)) {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{flag} must be a number of seconds from {TIMEOUT_MIN_S} to {TIMEOUT_MAX_S:e}, got {v}\n"),
            ));
        }
    }
    Ok(a)
}

/// The flags (clap ids) that say how a run is placed on the GPUs: the GPU backend reads them,
/// and a run reads them (not `--backend cpu`, not `--no-run`).
const GPU_PLACEMENT: &[&str] = &[
    "virtual_ranks",
    "devices",
    "alias",
    "transport",
    "attention",
    "no_direct_binding",
    "device_kernels",
    "stage_timeout",
    "setup_timeout",
];

/// The command-line spellings of those of `ids` given on the command line, in order.
fn given_flags<'a>(
    m: &clap::ArgMatches,
    ids: impl IntoIterator<Item = &'a &'a str>,
) -> Vec<String> {
    ids.into_iter()
        .filter(|id| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| format!("--{}", flag_name(id)))
        .collect()
}

/// `one` when `given` holds one flag, else `many` ("flag"/"flags", "it"/"them").
fn pick(given: &[String], one: &'static str, many: &'static str) -> &'static str {
    if given.len() == 1 {
        one
    } else {
        many
    }
}

/// A usage error for flags that conflict (exit 1, as clap's own).
fn conflict(message: String) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, message)
}

/// The shortest `--stage-timeout` / `--setup-timeout` (seconds): a shorter one fails every
/// stage at once.
pub const TIMEOUT_MIN_S: f64 = 1e-3;
/// The longest `--stage-timeout` / `--setup-timeout` (seconds, about 11.6 days).
pub const TIMEOUT_MAX_S: f64 = 1e6;

/// The command-line spelling of the argument with clap id `id` (`virtual_ranks` is
/// `--virtual`, the others their id with dashes).
fn flag_name(id: &str) -> String {
    use clap::CommandFactory;
    Args::command()
        .get_arguments()
        .find(|arg| arg.get_id() == id)
        .and_then(|arg| arg.get_long())
        .map_or_else(|| id.replace('_', "-"), str::to_string)
}

impl Args {
    /// The fault to inject: `--inject-fault`, else `$MERCURY_INJECT_FAULT` (non-empty).
    pub fn inject_fault(&self) -> Option<String> {
        self.inject_fault.clone().or_else(|| {
            std::env::var("MERCURY_INJECT_FAULT")
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
    }

    /// The seed of this run's inputs (fixed under a launcher: every process must draw the
    /// same inputs).
    pub fn seed(&self) -> u64 {
        if self.launcher.is_some() {
            return self.seed.unwrap_or(1);
        }
        self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
    }
}
