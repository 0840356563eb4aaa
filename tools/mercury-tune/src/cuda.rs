//! The GPU measuring backend of `--profile-top`: each candidate's plan through
//! `mercury_run::gpu::checked_bench`, the code of `mercury-run --backend cuda --check --bench`
//! (same placement flags, same checks against the single-device reference, same timing).

use mercury_plan::Plan;
use mercury_run::args::Args as RunArgs;
use mercury_run::Failure;
use mercury_search::profile::{Measure, MeasureError};
use mercury_search::search::{Candidate, DeviceInfo, Measurement};
use mercury_search::Topology;

/// Measures candidates on the GPUs with mercury-run's checked benchmark.
pub struct CudaMeasure {
    args: RunArgs,
    reference: Plan,
    info: DeviceInfo,
    what: String,
    /// mercury-run's lines of the last measurement (printed when it fails).
    pub last_lines: Vec<String>,
}

impl CudaMeasure {
    /// Probes the GPUs (`Err`: none usable, the caller exits 2) and parses the mercury-run
    /// flags `run_flags` (e.g. `--virtual`, `--devices 2`, `--transport nccl`); `--check` and
    /// `--bench` are always on. Starts mercury-run's fault watchdog.
    pub fn new(run_flags: &[String], reference: Plan, topo: &Topology) -> Result<Self, String> {
        let (n, args) = gpu_run_args(run_flags)?;
        let mut info = DeviceInfo::from_topology(topo);
        info.device = mercury_kernels_context()?;
        let what = format!(
            "cuda: {} ({} visible), mercury-run --check --bench {}",
            info.device,
            n,
            run_flags.join(" ")
        );
        Ok(CudaMeasure {
            args,
            reference,
            info,
            what,
            last_lines: vec![],
        })
    }
}

/// mercury-run's arguments for measuring candidates: `run_flags` after `--backend cuda
/// --check --bench`, validated as mercury-run validates its command line (`Err`: the flags
/// are bad or conflict; bad input, exit 1).
pub(crate) fn check_run_flags(run_flags: &[String]) -> Result<RunArgs, String> {
    let mut argv: Vec<String> = [
        "mercury-run",
        "(candidate)",
        "--backend",
        "cuda",
        "--check",
        "--bench",
    ]
    .map(String::from)
    .to_vec();
    argv.extend(run_flags.iter().cloned());
    mercury_run::args::parse_from(&argv).map_err(|e| {
        let why = e.to_string();
        format!(
            "the GPU flags ({}): {}",
            run_flags.join(" "),
            why.trim_start_matches("error: ").trim_end()
        )
    })
}

/// The GPU count (`Err`: none usable, the caller exits 2) and [`check_run_flags`]'s
/// arguments. Starts mercury-run's fault watchdog.
pub(crate) fn gpu_run_args(run_flags: &[String]) -> Result<(usize, RunArgs), String> {
    let args = check_run_flags(run_flags)?;
    let n = mercury_runtime::cuda::visible_gpus().map_err(|e| format!("no usable GPU: {e}"))?;
    if n == 0 {
        return Err("no usable GPU: the driver shows none".into());
    }
    mercury_run::gpu::start_watchdog(&args).map_err(failure_text)?;
    Ok((n, args))
}

pub(crate) fn mercury_kernels_context() -> Result<String, String> {
    // The device name through the runtime's context (the same the executor opens).
    mercury_run::gpu::device_name(0).map_err(failure_text)
}

pub(crate) fn failure_text(f: Failure) -> String {
    f.message().to_string()
}

impl Measure for CudaMeasure {
    fn describe(&self) -> String {
        self.what.clone()
    }
    fn on_gpu(&self) -> bool {
        true
    }
    fn device_info(&self) -> DeviceInfo {
        self.info.clone()
    }
    fn measure(&mut self, c: &Candidate) -> Result<Measurement, MeasureError> {
        let mut lines = Vec::new();
        let reference = self.reference.clone();
        let r = mercury_run::gpu::checked_bench(
            &self.args,
            c.plan.clone(),
            move || Ok(reference),
            &mut |l| lines.push(l),
        );
        self.last_lines = lines;
        let tail = || {
            self.last_lines
                .iter()
                .filter(|l| l.contains("check"))
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        };
        match r {
            Ok(b) => Ok(Measurement {
                latency_s: b.median_ms * 1e-3,
                gpu_seconds: b.wall_s * b.gpus as f64,
            }),
            Err(Failure::Check(m)) => Err(MeasureError::Check(format!("{m} ({})", tail()))),
            Err(Failure::NoDevice(m)) => Err(MeasureError::NoDevice(m)),
            Err(Failure::Input(m) | Failure::Located(m) | Failure::Device(m)) => {
                Err(MeasureError::Run(m.trim_end().to_string()))
            }
        }
    }
}
