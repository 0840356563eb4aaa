//! `mercury-mgpu`: multi-GPU checks and link measurements of the CUDA backend.
//!
//! ```text
//! mercury-mgpu info
//! mercury-mgpu selfcheck [--devices N] [--alias K] [--transport peer|nccl|both]
//!                        [--device-kernels-ptx FILE] [--seed N] [--no-nccl-single]
//! mercury-mgpu links [--out FILE] [--name NAME] [--min-kib N] [--max-mib N] [--reps N]
//!                    [--max-devices N] [--link copy|nccl] [--no-nccl]
//!                    [--measure-rates | --gemm-tflops X --attention-tflops X --attention-causal-tflops X]
//!                    [--launcher env [--ranks-per-process K] [--ranks-per-gpu N]]
//! ```
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
//! The arguments are checked before any GPU is probed: an option given twice, a count of 0,
//! a `--*-tflops` rate outside the range a topology file accepts (`RANGE_TFLOPS`), a
//! `--rates-*` value that is negative or above its limit ([`MAX_RATES_MS`],
//! [`MAX_RATES_WARM_S`]), an unreadable `--device-kernels-ptx` are refused, never clamped.

use mercury_bench::args::Flags;
use mercury_bench::links::{self, LinkSource, Rates};
use mercury_bench::mgpu::{self, Mode};
use mercury_runtime::cuda::{nccl, placement::PeerMatrix};
use std::process::ExitCode;

const USAGE: &str = "usage: mercury-mgpu info
       mercury-mgpu selfcheck [--devices N] [--alias K] [--transport peer|nccl|both] [--device-kernels-ptx FILE] [--seed N] [--no-nccl-single]
       mercury-mgpu links [--out FILE] [--name NAME] [--min-kib N] [--max-mib N] [--reps N] [--max-devices N] [--link copy|nccl] [--no-nccl] [--measure-rates [--rates-gap-ms X [--rates-burst-ms X]] [--rates-warm-s X]] [--gemm-tflops X] [--attention-tflops X] [--attention-causal-tflops X] [--launcher env [--ranks-per-process K] [--ranks-per-gpu N]]";

/// Why a command failed: its arguments (a usage error, exit 1) or the run (exit 2 when no GPU
/// or driver is usable, else 1).
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

/// A message about the arguments as a [`Failure::Usage`].
trait UsageError<T> {
    fn usage(self) -> Result<T, Failure>;
}

impl<T> UsageError<T> for Result<T, String> {
    fn usage(self) -> Result<T, Failure> {
        self.map_err(Failure::Usage)
    }
}

/// A count flag's value, refused when 0 (never raised to 1 behind the user's back).
fn count<I: Iterator<Item = String>>(it: &mut Flags<I>, flag: &str) -> Result<usize, String> {
    count_as(it, flag, flag)
}

/// [`count`] of option `name` written `flag`.
fn count_as<I: Iterator<Item = String>>(
    it: &mut Flags<I>,
    flag: &str,
    name: &str,
) -> Result<usize, String> {
    match it.parse_as::<usize>(flag, name)? {
        0 => Err(format!("{flag} must be at least 1\n{USAGE}")),
        n => Ok(n),
    }
}

/// A patch rate given on the command line: it goes into the topology file, so it must be in
/// the range the topology loader accepts (`RANGE_TFLOPS`), checked before any GPU is probed.
fn tflops<I: Iterator<Item = String>>(it: &mut Flags<I>, flag: &str) -> Result<f64, String> {
    let (lo, hi, unit) = mercury_search::topology::RANGE_TFLOPS;
    let raw = it.value(flag)?;
    raw.parse::<f64>()
        .map_err(|e| format!("{flag} {raw}: {e}"))?;
    mercury_bench::args::in_range(flag, &raw, lo, hi, unit)
        .map_err(|e| format!("{e} (the range of a topology file's rates)"))
}

/// The largest `--rates-gap-ms` and `--rates-burst-ms` (10 s): idle or a burst before each
/// timed burst, and the default grid has well over a hundred points of several bursts each.
const MAX_RATES_MS: f64 = 1e4;
/// The largest `--rates-warm-s` (an hour of GEMMs before the grid).
const MAX_RATES_WARM_S: f64 = 3600.0;

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

/// The arguments of `selfcheck`; `None` for `--help`.
struct SelfcheckArgs {
    devices: Option<usize>,
    alias: Option<usize>,
    modes: Vec<Mode>,
    /// The text of `--device-kernels-ptx FILE`, read before any GPU is probed.
    ptx: Option<String>,
    seed: u64,
    single: bool,
}

fn selfcheck_args(it: impl Iterator<Item = String>) -> Result<Option<SelfcheckArgs>, String> {
    let mut it = Flags::new(it, USAGE);
    let mut a = SelfcheckArgs {
        devices: None,
        alias: None,
        modes: vec![Mode::Peer, Mode::Nccl],
        ptx: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        single: true,
    };
    let mut ptx: Option<String> = None;
    while let Some(f) = it.next_flag() {
        match f.as_str() {
            "--devices" => a.devices = Some(count(&mut it, &f)?),
            "--alias" => a.alias = Some(count(&mut it, &f)?),
            "--transport" => {
                let v = it.value(&f)?;
                a.modes = match v.as_str() {
                    "peer" => vec![Mode::Peer],
                    "nccl" => vec![Mode::Nccl],
                    "both" => vec![Mode::Peer, Mode::Nccl],
                    _ => return Err(format!("--transport {v}: peer, nccl or both")),
                }
            }
            "--device-kernels-ptx" => ptx = Some(it.value(&f)?),
            "--seed" => a.seed = it.parse(&f)?,
            "--no-nccl-single" => {
                it.switch(&f)?;
                a.single = false;
            }
            "-h" | "--help" => return Ok(None),
            _ => return Err(format!("unknown argument {f}\n{USAGE}")),
        }
    }
    if let (Some(d), Some(k)) = (a.devices, a.alias) {
        return Err(format!(
            "--devices {d} and --alias {k}: one or the other (--alias puts every device id on GPU 0)"
        ));
    }
    if let Some(p) = ptx {
        a.ptx = Some(
            std::fs::read_to_string(&p)
                .map_err(|e| format!("cannot read --device-kernels-ptx '{p}': {e}"))?,
        );
    }
    Ok(Some(a))
}

fn selfcheck(it: impl Iterator<Item = String>) -> Result<bool, Failure> {
    let Some(SelfcheckArgs {
        devices,
        alias,
        modes,
        ptx,
        seed,
        single,
    }) = selfcheck_args(it).map_err(Failure::Usage)?
    else {
        mercury_bench::outln!("{USAGE}");
        return Ok(true);
    };
    // NVLink multicast off before anything can start NCCL.
    for note in nccl::prepare_env() {
        mercury_bench::outln!("env: {note}");
    }
    let n = visible()?;
    let ptx = match ptx {
        Some(text) => text,
        None => mgpu::device_kernels_ptx(None).map_err(|e| e.to_string())?,
    };
    let mut rows = Vec::new();
    match alias {
        Some(k) => {
            mercury_bench::outln!(
                "selfcheck: device ids 0..{k} all on GPU 0 (peer-copy paths on one GPU)"
            );
            for m in &modes {
                rows.extend(mgpu::placed_selfchecks(&ptx, k, Some(vec![0; k]), *m, seed));
            }
        }
        None => {
            let d = devices.unwrap_or(n);
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
    if single {
        rows.extend(mgpu::nccl_checks(&ptx, seed ^ 0x5eed));
    }
    Ok(mgpu::print_rows(&rows))
}

fn links_cmd(it: impl Iterator<Item = String>) -> Result<bool, Failure> {
    let mut it = Flags::new(it, USAGE);
    let mut out: Option<String> = None;
    let mut name: Option<String> = None;
    let mut min_kib: usize = 64;
    let mut max_mib: usize = 1024;
    let mut opts = links::MeasureOptions::default();
    let mut source = LinkSource::Copy;
    let mut rates = Rates::default();
    let mut rates_given = false;
    let mut measure_rates = false;
    let mut rates_gap_ms: Option<f64> = None;
    let mut rates_warm_s: Option<f64> = None;
    let mut rates_burst_ms: Option<f64> = None;
    let mut launcher = false;
    let mut per_process: Option<usize> = None;
    let mut per_gpu: Option<usize> = None;
    // Flags of the one-process measurement, refused with --launcher env.
    let mut single_only: Vec<String> = Vec::new();
    while let Some(f) = it.next_flag() {
        match f.as_str() {
            "--launcher" => {
                let v = it.value(&f).usage()?;
                if v != "env" {
                    return Err(Failure::Usage(format!(
                        "--launcher {v}: only 'env' (RANK, WORLD_SIZE, ...)"
                    )));
                }
                launcher = true;
            }
            "--ranks-per-process" => per_process = Some(count(&mut it, &f).usage()?),
            "--ranks-per-gpu" => per_gpu = Some(count(&mut it, &f).usage()?),
            "--out" => out = Some(it.value(&f).usage()?),
            "--name" => name = Some(it.value(&f).usage()?),
            "--min-kib" => min_kib = count(&mut it, &f).usage()?,
            // `--mib` is the older name (one size then; the largest now).
            "--max-mib" | "--mib" => max_mib = count_as(&mut it, &f, "--max-mib").usage()?,
            "--reps" => opts.reps = count(&mut it, &f).usage()?,
            "--max-devices" => {
                opts.max_devices = Some(count(&mut it, &f).usage()?);
                single_only.push(f.clone());
            }
            "--no-nccl" => {
                it.switch(&f).usage()?;
                opts.nccl = false;
                single_only.push(f.clone());
            }
            "--link" => {
                single_only.push(f.clone());
                let v = it.value(&f).usage()?;
                source = match v.as_str() {
                    "copy" => LinkSource::Copy,
                    "nccl" => LinkSource::Nccl,
                    _ => return Err(Failure::Usage(format!("--link {v}: copy or nccl"))),
                }
            }
            "--measure-rates" => {
                it.switch(&f).usage()?;
                measure_rates = true;
                single_only.push(f.clone());
            }
            // Refused outside their ranges, never clamped into them (0 is a regime: back to
            // back, one call per burst, no warm-up).
            "--rates-gap-ms" => {
                rates_gap_ms = Some(
                    it.number_in(&f, 0.0, MAX_RATES_MS, "milliseconds")
                        .usage()?,
                );
                single_only.push(f.clone());
            }
            "--rates-burst-ms" => {
                rates_burst_ms = Some(
                    it.number_in(&f, 0.0, MAX_RATES_MS, "milliseconds")
                        .usage()?,
                );
                single_only.push(f.clone());
            }
            "--rates-warm-s" => {
                rates_warm_s = Some(it.number_in(&f, 0.0, MAX_RATES_WARM_S, "seconds").usage()?);
                single_only.push(f.clone());
            }
            "--gemm-tflops" => {
                rates.gemm_tflops = tflops(&mut it, &f).usage()?;
                rates_given = true;
            }
            "--attention-tflops" => {
                rates.attention_tflops = tflops(&mut it, &f).usage()?;
                rates_given = true;
            }
            "--attention-causal-tflops" => {
                rates.attention_causal_tflops = tflops(&mut it, &f).usage()?;
                rates_given = true;
            }
            "-h" | "--help" => {
                mercury_bench::outln!("{USAGE}");
                return Ok(true);
            }
            _ => return Err(Failure::Usage(format!("unknown argument {f}\n{USAGE}"))),
        }
    }
    if (rates_gap_ms.is_some() || rates_warm_s.is_some() || rates_burst_ms.is_some())
        && !measure_rates
    {
        return Err(Failure::Usage(
            "--rates-gap-ms, --rates-burst-ms and --rates-warm-s adjust --measure-rates".into(),
        ));
    }
    if rates_given && measure_rates {
        return Err(Failure::Usage("--measure-rates measures the rates that --gemm-tflops, --attention-tflops and --attention-causal-tflops give: one or the other".into()));
    }
    if rates_given {
        rates.origin = "given on the command line (mercury-mgpu links --gemm-tflops ...), not measured by this tool".into();
    }
    let (lo, hi) = (min_kib << 10, max_mib << 20);
    if lo > hi {
        return Err(Failure::Usage(format!(
            "--min-kib {min_kib} is above --max-mib {max_mib}\n{USAGE}"
        )));
    }
    opts.sizes = links::sizes(lo, hi);
    // Arguments first, the GPU after: a wrong flag is reported as such on any machine.
    let two_tier = if launcher {
        if let Some(f) = single_only.first() {
            return Err(Failure::Usage(format!(
                "{f} is for the one-process measurement; with --launcher env the tiers are NCCL between processes and device copies"
            )));
        }
        let k = per_process.unwrap_or(4);
        if k < 2 || per_gpu.is_some_and(|n| n < k) {
            return Err(Failure::Usage(format!(
                "--ranks-per-process {k}{}: at least 2 ranks per process, and at least as many per GPU",
                per_gpu.map(|n| format!(" --ranks-per-gpu {n}")).unwrap_or_default()
            )));
        }
        let env = mercury_runtime::cuda::launcher::LaunchEnv::from_env()
            .map_err(|e| format!("--launcher env: {e}"))?
            .ok_or("--launcher env: RANK and WORLD_SIZE are not set (start every process with them, or through torchrun)")?;
        Some((env, k))
    } else {
        if per_process.is_some() || per_gpu.is_some() {
            return Err(Failure::Usage(
                "--ranks-per-process and --ranks-per-gpu describe --launcher env runs".into(),
            ));
        }
        None
    };
    nccl::prepare_env();
    if let Some((env, k)) = two_tier {
        return Ok(two_tier_cmd(&env, out, name, &rates, &opts, k, per_gpu)?);
    }
    visible()?;
    let r = links::measure(&opts).map_err(|e| e.to_string())?;
    let n = r.devices.len();
    let name = name.unwrap_or_else(|| {
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
    if measure_rates {
        let mut grid = mercury_bench::bench::RateGrid::default();
        grid.gap_ms = rates_gap_ms.unwrap_or(grid.gap_ms);
        grid.warm_s = rates_warm_s.unwrap_or(grid.warm_s);
        grid.burst_ms = rates_burst_ms.unwrap_or(grid.burst_ms);
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
    if let Some(p) = out {
        if !rates_ok {
            return Err(Failure::Run(format!(
                "not writing {p}: a rate measurement failed (see the R. rows above)"
            )));
        }
        std::fs::write(&p, &text).map_err(|e| format!("cannot write {p}: {e}"))?;
        mercury_bench::outln!("# written to {p}");
    }
    Ok(rates_ok)
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
    out: Option<String>,
    name: Option<String>,
    rates: &Rates,
    opts: &links::MeasureOptions,
    per_process: usize,
    per_gpu: Option<usize>,
) -> Result<bool, String> {
    let ordinal = env.local_rank % visible()?.max(1);
    let r = links::two_tier::measure(env, ordinal, per_process, per_gpu, &opts.sizes, opts.reps)
        .map_err(|e| format!("process {}: {e}", env.rank))?;
    let Some(r) = r else {
        mercury_bench::outln!(
            "[process {}] links: took part (process 0 reports)",
            env.rank
        );
        return Ok(true);
    };
    let name = name
        .unwrap_or_else(|| format!("measured-two-tier-{}x{}", r.processes, r.ranks_per_process));
    let text = links::two_tier::topology_toml(&r, &name, rates);
    mercury_bench::out!("{text}");
    if let Some(p) = out {
        std::fs::write(&p, &text).map_err(|e| format!("cannot write {p}: {e}"))?;
        mercury_bench::outln!("# written to {p}");
    }
    Ok(true)
}

fn main() -> ExitCode {
    mercury_bench::init_logging();
    let mut it = std::env::args().skip(1);
    let r = match it.next().as_deref() {
        Some("info") => match it.next() {
            None => info().map_err(Failure::Run),
            Some(a) if a == "-h" || a == "--help" => {
                mercury_bench::outln!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Some(a) => Err(Failure::Usage(format!(
                "info takes no arguments (got '{a}')\n{USAGE}"
            ))),
        },
        Some("selfcheck") => selfcheck(it),
        Some("links") => links_cmd(it),
        Some("-h" | "--help" | "help") => {
            mercury_bench::outln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(Failure::Usage(format!(
            "unknown command '{other}'\n{USAGE}"
        ))),
        None => Err(Failure::Usage(format!("no command given\n{USAGE}"))),
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
