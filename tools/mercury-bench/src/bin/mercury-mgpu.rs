//! `mercury-mgpu`: multi-GPU checks and link measurements of the CUDA backend.
//!
//! ```text
//! mercury-mgpu info
//! mercury-mgpu selfcheck [--devices N] [--alias K] [--transport peer|nccl|both]
//!                        [--device-kernels-ptx FILE] [--seed N] [--no-nccl-single]
//! mercury-mgpu links [--out FILE] [--name NAME] [--min-kib N] [--max-mib N] [--reps N]
//!                    [--max-devices N] [--link copy|nccl] [--no-nccl]
//!                    [--measure-rates [--rates-gap-ms X] [--rates-burst-ms X] [--rates-warm-s X]
//!                     | --gemm-tflops X --attention-tflops X --attention-causal-tflops X]
//!                    [--launcher env [--ranks-per-process K] [--ranks-per-gpu N]]
//! ```
//!
//! (`mercury-mgpu help [COMMAND]` or `COMMAND --help` says what each option does.)
//!
//! `selfcheck` runs the P0 executor self-checks with rank r on GPU r % N (default: every
//! visible GPU) under the chosen transports, plus the NCCL checks one GPU can run; with
//! `--alias K` rank r runs on device id r % K and every id on GPU 0 (the peer-copy paths on
//! one GPU). `links` measures, per GPU and per pair of GPUs, what the transports reach (local
//! copies, peer copies pulled and pushed, NCCL send/recv; 64 KiB to 1 GiB, fitted as latency +
//! bytes / bandwidth), prints a table and writes a topology file (docs/topology.md); with
//! `--measure-rates` also the GEMM and attention patches' rates at a grid of shapes on GPU 0
//! (`bench::RateGrid`, about a minute on an H200), written as the file's rate tables. With
//! `--launcher env` every process of a launcher runs it: the processes are "nodes" of K virtual
//! ranks on one GPU each (default 4), process 0 measures NCCL send/recv to process 1 over the
//! bridge and a device copy, and writes a two-level topology whose rates are one rank's share of
//! a GPU shared by N ranks (default K); see `links::two_tier`. Exit status: 0 all passed, 1 a check failed or bad
//! arguments, 2 no usable GPU. NCCL_NVLS_ENABLE=0 is set before NCCL starts.
//!
//! The arguments are read by clap and checked before any GPU is probed ([`parse`]): an option
//! given twice, a count of 0, a `--*-tflops` rate outside the range a topology file accepts
//! (`RANGE_TFLOPS`), a `--rates-*` value that is negative or above its limit
//! ([`MAX_RATES_MS`], [`MAX_RATES_WARM_S`]), options of one mode given in the other, an
//! unreadable `--device-kernels-ptx` are refused (`error: ...`, exit 1), never clamped.

use clap::{Parser, Subcommand, ValueEnum};
use mercury_bench::args::{at_least_one, in_range, read_ptx};
use mercury_bench::bench::RateGrid;
use mercury_bench::links::{self, LinkSource, Rates};
use mercury_bench::mgpu::{self, Mode};
use mercury_runtime::cuda::{nccl, placement::PeerMatrix};
use std::path::PathBuf;
use std::process::ExitCode;

/// The largest `--rates-gap-ms` and `--rates-burst-ms` (10 s): idle or a burst before each
/// timed burst, and the default grid has well over a hundred points of several bursts each.
const MAX_RATES_MS: f64 = 1e4;
/// The largest `--rates-warm-s` (an hour of GEMMs before the grid).
const MAX_RATES_WARM_S: f64 = 3600.0;

#[derive(Debug, Parser)]
#[command(
    name = "mercury-mgpu",
    version,
    about = "Multi-GPU checks and link measurements of the CUDA backend (docs/multi-gpu.md)",
    subcommand_required = true,
    // No command is a usage error (`error: ...`, exit 1), not the help.
    arg_required_else_help = false
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// GPUs, peer-access matrix, NCCL version.
    Info,
    /// The P0 executor self-checks with rank r on GPU r % N, plus the NCCL checks one GPU can
    /// run.
    Selfcheck(SelfcheckArgs),
    /// Measure what the transports reach per GPU and per pair of GPUs; print a table and a
    /// topology file (docs/topology.md).
    Links(LinksArgs),
}

/// `selfcheck --transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    /// Copies and copy-engine peer copies.
    Peer,
    /// NCCL (groups sharing a GPU fall back to copies).
    Nccl,
    /// Each check under both.
    Both,
}

#[derive(Debug, clap::Args)]
struct SelfcheckArgs {
    /// GPUs to place ranks on, rank r on GPU r % N (default: every visible GPU).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = at_least_one("GPUs the ranks are placed on"))]
    devices: Option<usize>,
    /// K device ids, all on GPU 0, rank r on id r % K: the peer-copy paths on one GPU (not
    /// with --devices).
    #[arg(long, value_name = "K", conflicts_with = "devices", allow_negative_numbers = true,
          value_parser = at_least_one("device ids on GPU 0"))]
    alias: Option<usize>,
    /// The transports the placed checks run under.
    #[arg(long, value_enum, default_value_t = TransportArg::Both)]
    transport: TransportArg,
    /// The device kernels' PTX (from `mercury-opt --emit=ptx --all-device-kernels`) instead of
    /// compiling it here; read before any GPU is probed.
    #[arg(long, value_name = "FILE")]
    device_kernels_ptx: Option<PathBuf>,
    /// Seed of the random inputs (default: a fresh one every run).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Leave out the NCCL checks one GPU can run.
    #[arg(long)]
    no_nccl_single: bool,
    /// The text of `--device-kernels-ptx`.
    #[arg(skip)]
    ptx: Option<String>,
}

/// `links --link`: which measured method the topology file's link level describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LinkArg {
    /// Peer copies pulled by the receiver (mercury-run's --transport peer).
    Copy,
    /// NCCL send/recv.
    Nccl,
}

/// `links --launcher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LauncherArg {
    /// RANK, WORLD_SIZE, LOCAL_RANK from the environment (torchrun style).
    Env,
}

/// The options of the one-process measurement, refused with `--launcher env`.
const SINGLE_ONLY: [&str; 7] = [
    "max_devices",
    "no_nccl",
    "link",
    "measure_rates",
    "rates_gap_ms",
    "rates_burst_ms",
    "rates_warm_s",
];

/// The patch rates given on the command line, refused with `--measure-rates`.
const GIVEN_RATES: [&str; 3] = ["gemm_tflops", "attention_tflops", "attention_causal_tflops"];

#[derive(Debug, clap::Args)]
struct LinksArgs {
    /// Write the topology file here.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The topology's name (default: measured-<GPU>-1x<N>, or measured-two-tier-<P>x<K>); not
    /// empty, as the topology loader requires, and checked before anything is measured.
    #[arg(long, value_parser = non_blank_name)]
    name: Option<String>,
    /// The smallest transfer, KiB.
    #[arg(long, value_name = "N", default_value_t = 64, allow_negative_numbers = true,
          value_parser = at_least_one("KiB, the smallest transfer"))]
    min_kib: usize,
    /// The largest transfer, MiB (`--mib` is its older name).
    #[arg(long, value_name = "N", default_value_t = 1024, alias = "mib",
          allow_negative_numbers = true, value_parser = at_least_one("MiB, the largest transfer"))]
    max_mib: usize,
    /// Timed repetitions per size.
    #[arg(long, value_name = "N", default_value_t = links::MeasureOptions::default().reps,
          allow_negative_numbers = true, value_parser = at_least_one("timed repetitions per size"))]
    reps: usize,
    /// Measure only the first N GPUs.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = at_least_one("GPUs measured"))]
    max_devices: Option<usize>,
    /// The measured method the topology file's link level describes.
    #[arg(long, value_enum, default_value_t = LinkArg::Copy)]
    link: LinkArg,
    /// Do not measure NCCL send/recv.
    #[arg(long)]
    no_nccl: bool,
    /// Also time the GEMM and attention patches at a grid of shapes on GPU 0 (about a minute on
    /// an H200), written as the file's rate tables; not with the --*-tflops rates it measures.
    #[arg(long, conflicts_with_all = GIVEN_RATES)]
    measure_rates: bool,
    /// With --measure-rates: idle milliseconds before each timed burst (0: the calls run back
    /// to back, no bursts).
    #[arg(long, value_name = "X", requires = "measure_rates", allow_hyphen_values = true,
          default_value_t = RateGrid::default().gap_ms,
          value_parser = in_range(0.0, MAX_RATES_MS, "milliseconds"))]
    rates_gap_ms: f64,
    /// With --measure-rates: a timed burst is as many back-to-back calls as fill this many
    /// milliseconds (at least one).
    #[arg(long, value_name = "X", requires = "measure_rates", allow_hyphen_values = true,
          default_value_t = RateGrid::default().burst_ms,
          value_parser = in_range(0.0, MAX_RATES_MS, "milliseconds"))]
    rates_burst_ms: f64,
    /// With --measure-rates: seconds of 8192^3 GEMMs before the grid.
    #[arg(long, value_name = "X", requires = "measure_rates", allow_hyphen_values = true,
          default_value_t = RateGrid::default().warm_s,
          value_parser = in_range(0.0, MAX_RATES_WARM_S, "seconds"))]
    rates_warm_s: f64,
    /// The GEMM patch's rate written to the file, TFLOP/s (default: the H200 anchor).
    #[arg(long, value_name = "X", allow_hyphen_values = true, value_parser = tflops)]
    gemm_tflops: Option<f64>,
    /// The attention patch's rate written to the file, TFLOP/s (default: the H200 anchor).
    #[arg(long, value_name = "X", allow_hyphen_values = true, value_parser = tflops)]
    attention_tflops: Option<f64>,
    /// The causal attention patch's rate written to the file, TFLOP/s (default: the H200
    /// anchor).
    #[arg(long, value_name = "X", allow_hyphen_values = true, value_parser = tflops)]
    attention_causal_tflops: Option<f64>,
    /// Run by every process of a launcher: the processes are nodes of K virtual ranks on one
    /// GPU each; process 0 measures NCCL send/recv to process 1 and a device copy, and writes a
    /// two-level topology. Not with the options of the one-process measurement.
    #[arg(long, value_enum, value_name = "KIND", conflicts_with_all = SINGLE_ONLY)]
    launcher: Option<LauncherArg>,
    /// With --launcher env: K, the virtual ranks of a process (at least 2).
    #[arg(long, value_name = "K", requires = "launcher", default_value_t = 4,
          allow_negative_numbers = true, value_parser = at_least_one("virtual ranks per process"))]
    ranks_per_process: usize,
    /// With --launcher env: the ranks sharing a GPU, which divide its rates (default: K times
    /// the processes on the same host and GPU; at least K).
    #[arg(long, value_name = "N", requires = "launcher", allow_negative_numbers = true,
          value_parser = at_least_one("ranks sharing a GPU"))]
    ranks_per_gpu: Option<usize>,
}

/// A patch rate given on the command line: it goes into the topology file, so it must be in
/// the range the topology loader accepts (`RANGE_TFLOPS`), checked before any GPU is probed.
fn tflops(raw: &str) -> Result<f64, String> {
    let (lo, hi, unit) = mercury_search::topology::RANGE_TFLOPS;
    // Not a number is said as such, without the range.
    raw.parse::<f64>().map_err(|e| e.to_string())?;
    in_range(lo, hi, unit)(raw).map_err(|e| format!("{e} (the range of a topology file's rates)"))
}

impl LinksArgs {
    /// What clap cannot say of the options: the sizes in order, and a process of at least 2
    /// ranks with at least as many per GPU.
    fn check(&self) -> Result<(), clap::Error> {
        let bad = |m: String| clap::Error::raw(clap::error::ErrorKind::ValueValidation, m);
        if (self.min_kib << 10) > (self.max_mib << 20) {
            return Err(bad(format!(
                "--min-kib {} is above --max-mib {}\n",
                self.min_kib, self.max_mib
            )));
        }
        let k = self.ranks_per_process;
        if self.launcher.is_some() && (k < 2 || self.ranks_per_gpu.is_some_and(|n| n < k)) {
            return Err(bad(format!(
                "--ranks-per-process {k}{}: at least 2 ranks per process, and at least as many per GPU\n",
                self.ranks_per_gpu
                    .map(|n| format!(" --ranks-per-gpu {n}"))
                    .unwrap_or_default()
            )));
        }
        Ok(())
    }
}

/// The arguments, checked before any GPU is probed. `Err`: `--help` or `--version`, or a usage
/// error.
fn parse() -> Result<Cli, clap::Error> {
    let mut cli = Cli::try_parse()?;
    match &mut cli.command {
        Command::Info => {}
        Command::Selfcheck(a) => a.ptx = read_ptx(a.device_kernels_ptx.as_deref())?,
        Command::Links(a) => a.check()?,
    }
    Ok(cli)
}

/// Why a command failed: its arguments against the machine (a usage error, exit 1) or the run
/// (exit 2 when no GPU or driver is usable, else 1).
enum Failure {
    Usage(String),
    Run(String),
}

impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Run(m)
    }
}

impl From<&str> for Failure {
    fn from(m: &str) -> Failure {
        Failure::Run(m.to_string())
    }
}

fn visible() -> Result<usize, String> {
    mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver)
        .map_err(|e| e.to_string())?;
    // Opening device 0 initialises the driver.
    mercury_kernels::cuda::open_context(0).map_err(|e| e.to_string())?;
    cudarc::driver::CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| e.to_string())
}

fn info() -> Result<bool, String> {
    let n = visible()?;
    let mut ctxs = Vec::new();
    for i in 0..n {
        let c = mercury_kernels::cuda::open_context(i).map_err(|e| e.to_string())?;
        mercury_bench::outln!(
            "GPU {i}: {} ({} MiB)",
            c.name().unwrap_or_default(),
            c.total_mem().unwrap_or(0) >> 20
        );
        ctxs.push(c);
    }
    let m = PeerMatrix::build(&(0..n).collect::<Vec<_>>(), |a, b| {
        let mut can = 0i32;
        // SAFETY: valid out-pointer; both devices exist.
        let r = unsafe {
            cudarc::driver::sys::cuDeviceCanAccessPeer(
                &mut can,
                ctxs[a].cu_device(),
                ctxs[b].cu_device(),
            )
        };
        r.result().is_ok() && can != 0
    });
    for a in 0..n {
        let row: Vec<&str> = (0..n)
            .map(|b| match m.link(a, b) {
                mercury_runtime::cuda::placement::LinkClass::Local => "X",
                mercury_runtime::cuda::placement::LinkClass::Peer => "P2P",
                mercury_runtime::cuda::placement::LinkClass::Staged => "host",
            })
            .collect();
        mercury_bench::outln!("peer access from GPU {a}: {}", row.join(" "));
    }
    match nccl::version() {
        Ok((a, b, c)) => mercury_bench::outln!(
            "NCCL {a}.{b}.{c}; NCCL_NVLS_ENABLE={}",
            std::env::var("NCCL_NVLS_ENABLE").unwrap_or_default()
        ),
        Err(e) => mercury_bench::outln!("NCCL: {e}"),
    }
    Ok(true)
}

fn selfcheck(a: SelfcheckArgs) -> Result<bool, Failure> {
    let modes = match a.transport {
        TransportArg::Peer => vec![Mode::Peer],
        TransportArg::Nccl => vec![Mode::Nccl],
        TransportArg::Both => vec![Mode::Peer, Mode::Nccl],
    };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    // NVLink multicast off before anything can start NCCL.
    for note in nccl::prepare_env() {
        mercury_bench::outln!("env: {note}");
    }
    let n = visible()?;
    let ptx = match a.ptx {
        Some(text) => text,
        None => mgpu::device_kernels_ptx(None).map_err(|e| e.to_string())?,
    };
    let mut rows = Vec::new();
    match a.alias {
        Some(k) => {
            mercury_bench::outln!(
                "selfcheck: device ids 0..{k} all on GPU 0 (peer-copy paths on one GPU)"
            );
            for m in &modes {
                rows.extend(mgpu::placed_selfchecks(&ptx, k, Some(vec![0; k]), *m, seed));
            }
        }
        None => {
            let d = a.devices.unwrap_or(n);
            if d > n {
                return Err(Failure::Usage(format!(
                    "--devices {d} but only {n} GPU(s) are visible (--alias K runs the peer-copy paths of K device ids on one GPU)"
                )));
            }
            mercury_bench::outln!("selfcheck: rank r on GPU r % {d} ({n} visible)");
            for m in &modes {
                rows.extend(mgpu::placed_selfchecks(&ptx, d, None, *m, seed));
            }
        }
    }
    if !a.no_nccl_single {
        rows.extend(mgpu::nccl_checks(&ptx, seed ^ 0x5eed));
    }
    Ok(mgpu::print_rows(&rows))
}

fn links_cmd(a: LinksArgs) -> Result<bool, Failure> {
    let opts = links::MeasureOptions {
        sizes: links::sizes(a.min_kib << 10, a.max_mib << 20),
        reps: a.reps,
        max_devices: a.max_devices,
        nccl: !a.no_nccl,
    };
    let source = match a.link {
        LinkArg::Copy => LinkSource::Copy,
        LinkArg::Nccl => LinkSource::Nccl,
    };
    let mut rates = Rates::default();
    if a.gemm_tflops.is_some()
        || a.attention_tflops.is_some()
        || a.attention_causal_tflops.is_some()
    {
        rates = Rates {
            gemm_tflops: a.gemm_tflops.unwrap_or(rates.gemm_tflops),
            attention_tflops: a.attention_tflops.unwrap_or(rates.attention_tflops),
            attention_causal_tflops: a
                .attention_causal_tflops
                .unwrap_or(rates.attention_causal_tflops),
            origin: "given on the command line (mercury-mgpu links --gemm-tflops ...), not measured by this tool".into(),
            ..rates
        };
    }
    // Arguments first (checked by `parse`), the environment and the GPU after: a wrong flag is
    // reported as such on any machine.
    let two_tier = match a.launcher {
        Some(LauncherArg::Env) => {
            let env = mercury_runtime::cuda::launcher::LaunchEnv::from_env()
                .map_err(|e| format!("--launcher env: {e}"))?
                .ok_or("--launcher env: RANK and WORLD_SIZE are not set (start every process with them, or through torchrun)")?;
            Some(env)
        }
        None => None,
    };
    nccl::prepare_env();
    if let Some(env) = two_tier {
        return Ok(two_tier_cmd(&env, &a, &rates, &opts)?);
    }
    visible()?;
    let r = links::measure(&opts).map_err(|e| e.to_string())?;
    let n = r.devices.len();
    let name = a.name.unwrap_or_else(|| {
        format!(
            "measured-{}-1x{n}",
            r.devices[0]
                .name
                .to_lowercase()
                .replace("nvidia ", "")
                .replace(' ', "-")
        )
    });
    let mut rates_ok = true;
    if a.measure_rates {
        let grid = RateGrid {
            gap_ms: a.rates_gap_ms,
            warm_s: a.rates_warm_s,
            burst_ms: a.rates_burst_ms,
            ..RateGrid::default()
        };
        let (measured, ok) = measure_patch_rates(opts.reps, &grid)?;
        rates = measured;
        rates_ok = ok;
    }
    let text = links::topology_toml(&r, &name, &rates, source);
    if n == 1 {
        mercury_bench::outln!(
            "links: one GPU visible: only the device-to-device copy was measured (no peer link)"
        );
    }
    mercury_bench::out!("{}", links::table(&r));
    mercury_bench::outln!();
    mercury_bench::out!("{text}");
    if let Some(p) = &a.out {
        if !rates_ok {
            return Err(Failure::Run(format!(
                "not writing {}: a rate measurement failed (see the R. rows above)",
                p.display()
            )));
        }
        write_topology(p, &text)?;
    }
    Ok(rates_ok)
}

/// Writes the topology file `--out` names, and says so.
fn write_topology(path: &std::path::Path, text: &str) -> Result<(), String> {
    let p = path.display();
    std::fs::write(path, text).map_err(|e| format!("cannot write {p}: {e}"))?;
    mercury_bench::outln!("# written to {p}");
    Ok(())
}

/// `links --measure-rates`: the GEMM and attention patches timed on GPU 0 at the default
/// grid (`mercury_bench::bench::RateGrid`), `reps` timed calls per shape; prints one row per
/// shape and returns the rates with their tables, and whether every shape passed. `reps` is
/// kept within 3..=20 per shape (fewer is noise, more only lengthens the grid).
fn measure_patch_rates(
    reps: usize,
    grid: &mercury_bench::bench::RateGrid,
) -> Result<(Rates, bool), String> {
    use mercury_bench::bench::{Bench, BenchOptions};
    let ctx = mercury_kernels::cuda::open_context(0).map_err(|e| e.to_string())?;
    let gpu = ctx.name().unwrap_or_default();
    let kept = reps.clamp(3, 20);
    if kept != reps {
        mercury_bench::outln!("rates: at least {kept} timed calls per shape (--reps {reps} is the links'; the rate grid keeps 3..=20)");
    }
    let opts = BenchOptions {
        reps: kept,
        ..BenchOptions::default()
    };
    let mut bench = Bench::new(ctx, opts, None).map_err(|e| format!("rates: {e}"))?;
    let (gemm, attention) = bench
        .measure_rates(grid)
        .map_err(|e| format!("rates: {e}"))?;
    // The rows were printed as they were measured.
    let failed: Vec<&str> = bench
        .rows()
        .iter()
        .filter(|r| !r.pass)
        .map(|r| r.id.as_str())
        .collect();
    mercury_bench::outln!(
        "rates on GPU 0 ({gpu}): {} shapes, {} failed{}",
        bench.rows().len(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    let ok = failed.is_empty();
    let origin = format!(
        "Measured by mercury-mgpu links --measure-rates on GPU 0 ({gpu}): the GEMM patch (cuBLASLt, bf16 x bf16 += f32) at {} shapes and the cuDNN attention patch (bf16, {} heads of {}) at {} shapes, each point the median of bursts of {} ms after {} ms idle; the single figures are the points at 8192^3 and 32 heads at S32K",
        gemm.len(),
        grid.heads.iter().map(|(h, _)| h.to_string()).collect::<Vec<_>>().join(" or "),
        grid.d,
        attention.len(),
        grid.burst_ms,
        grid.gap_ms
    );
    Ok((Rates::measured(gemm, attention, origin), ok))
}

/// `links --launcher env`: this process's part of the two-tier measurement; process 0 prints
/// and writes the topology.
fn two_tier_cmd(
    env: &mercury_runtime::cuda::launcher::LaunchEnv,
    a: &LinksArgs,
    rates: &Rates,
    opts: &links::MeasureOptions,
) -> Result<bool, String> {
    let ordinal = env.local_rank % visible()?.max(1);
    let (k, per_gpu) = (a.ranks_per_process, a.ranks_per_gpu);
    let r = links::two_tier::measure(env, ordinal, k, per_gpu, &opts.sizes, opts.reps)
        .map_err(|e| format!("process {}: {e}", env.rank))?;
    let Some(r) = r else {
        mercury_bench::outln!(
            "[process {}] links: took part (process 0 reports)",
            env.rank
        );
        return Ok(true);
    };
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("measured-two-tier-{}x{}", r.processes, r.ranks_per_process));
    let text = links::two_tier::topology_toml(&r, &name, rates);
    mercury_bench::out!("{text}");
    if let Some(p) = &a.out {
        write_topology(p, &text)?;
    }
    Ok(true)
}

fn main() -> ExitCode {
    mercury_bench::init_logging();
    let cli = match parse() {
        Ok(c) => c,
        // Help and version exit 0, usage errors 1.
        Err(e) => return mercury_driver::cli::clap_failure(&e),
    };
    let r = match cli.command {
        Command::Info => info().map_err(Failure::Run),
        Command::Selfcheck(a) => selfcheck(a),
        Command::Links(a) => links_cmd(a),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Failure::Usage(m)) => mercury_driver::cli::usage_error("mercury-mgpu", &m),
        Err(Failure::Run(e)) => {
            eprintln!("mercury-mgpu: error: {e}");
            if e.contains("driver") || e.contains("GPU") || e.contains("libcuda") {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// `--name`: a topology name the loader accepts (not blank, no control characters), refused before any GPU
/// time is spent measuring a file that could not be loaded back.
fn non_blank_name(raw: &str) -> Result<String, String> {
    if raw.trim().is_empty() {
        Err("a topology name must not be empty (the topology loader refuses `name = \"\"`)".into())
    } else if raw.chars().any(char::is_control) {
        Err("a topology name must not hold control characters (a newline or a tab)".into())
    } else {
        Ok(raw.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        // The ids `conflicts_with_all` and `requires` name exist (SINGLE_ONLY, GIVEN_RATES).
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn an_older_spelling_is_the_same_option() {
        let parse = |argv: &[&str]| Cli::try_parse_from(argv);
        let Command::Links(a) = parse(&["m", "links", "--mib", "64"]).unwrap().command else {
            panic!("not links");
        };
        assert_eq!(a.max_mib, 64);
        let e = parse(&["m", "links", "--mib", "64", "--max-mib", "128"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
    }
}
