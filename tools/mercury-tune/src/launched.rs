//! The GPU measuring backend of `--profile-top` under a launcher (`--launcher env`): every
//! process runs the same search and then the model's K best candidates together through
//! `mercury_run::launched::Session` (mercury-run `--launcher env --check --bench`: same
//! placement, same checks against the single-device reference, same timing). A candidate's
//! time is the slowest process's median; a check that fails in any process drops the
//! candidate in every process; a failure the processes cannot agree on stops profiling.

use mercury_plan::Plan;
use mercury_run::args::Args as RunArgs;
use mercury_run::launched::{Session, Verdict};
use mercury_run::Failure;
use mercury_search::profile::{Measure, MeasureError};
use mercury_search::search::{Candidate, DeviceInfo, Measurement};
use mercury_search::Topology;

/// Measures candidates in every process of a launched run.
pub struct LaunchedMeasure {
    args: RunArgs,
    reference: Plan,
    info: DeviceInfo,
    what: String,
    /// Joined at the first candidate (its rank count sizes the world).
    session: Option<Session>,
}

impl LaunchedMeasure {
    /// Probes the GPUs (`Err`: none usable, the caller exits 2), parses the mercury-run flags
    /// `run_flags` (`--launcher env` among them; `--check` and `--bench` are always on) and
    /// starts mercury-run's fault watchdog. The processes join their world at the first
    /// candidate.
    ///
    /// # Errors
    /// No usable GPU, bad flags (the message).
    pub fn new(run_flags: &[String], reference: Plan, topo: &Topology) -> Result<Self, String> {
        let (_, args) = crate::cuda::gpu_run_args(run_flags)?;
        let mut info = DeviceInfo::from_topology(topo);
        info.device = crate::cuda::mercury_kernels_context()?;
        let what = format!(
            "cuda: the launcher's processes together, each mercury-run --check --bench {} (time: the slowest process's)",
            run_flags.join(" ")
        );
        Ok(LaunchedMeasure {
            args,
            reference,
            info,
            what,
            session: None,
        })
    }
}

impl Measure for LaunchedMeasure {
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
        let stop = |f: Failure| MeasureError::Stop(crate::cuda::failure_text(f));
        if self.session.is_none() {
            let s = Session::start(&self.args, c.plan.num_ranks(), &mut |l| println!("{l}"))
                .map_err(stop)?;
            self.session = Some(s);
        }
        let session = self.session.as_ref().expect("joined above");
        let tag = session.tag.clone();
        let mut lines = Vec::new();
        let r = session.run_plan(&self.args, &c.plan, &self.reference, &mut |l| lines.push(l));
        for l in lines
            .iter()
            .filter(|l| l.contains("check") || l.contains("error"))
        {
            println!("{l}");
        }
        match r {
            Ok(Verdict::Refused(why)) => Err(MeasureError::Run(why)),
            Ok(Verdict::Ran(o)) if !o.failed_processes.is_empty() => {
                Err(MeasureError::Check(format!(
                    "{tag} the check failed in process(es) {:?}{}",
                    o.failed_processes,
                    if o.failed_here.is_empty() {
                        String::new()
                    } else {
                        format!(" (here: {})", o.failed_here.join(", "))
                    }
                )))
            }
            // The device time: this process's wall time on its GPUs, times the processes
            // (each holds its own for as long); processes sharing a GPU count it twice.
            Ok(Verdict::Ran(o)) => Ok(Measurement {
                latency_s: o.slowest_ms * 1e-3,
                gpu_seconds: o.wall_s * session.gpus_here() as f64 * session.processes() as f64,
            }),
            Err(f) => Err(MeasureError::Stop(format!(
                "{tag} {}",
                crate::cuda::failure_text(f)
            ))),
        }
    }
}
