//! Where a process is and what went wrong: [`Phase`], [`Who`], [`Cause`] and the one-line
//! [`FaultReport`] whose first line scripts grep for.

use std::fmt;

/// The part of a run a process is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Not in a GPU or NCCL step.
    #[default]
    Idle,
    /// A blocking setup step (NCCL bootstrap, communicator split).
    Setup(&'static str),
    /// Slot initialisation, before the first stage.
    Init,
    /// Plan stage `s` (0-based; reports say `s + 1`).
    Stage(usize),
    /// The output gather after the last stage.
    Outputs,
}

impl Phase {
    /// The phase of mark phase index `i`: 0 = initialisation, 1..=stages = stage i - 1,
    /// stages + 1 = the output gather.
    pub fn from_index(i: usize, stages: usize) -> Phase {
        match i {
            0 => Phase::Init,
            i if i <= stages => Phase::Stage(i - 1),
            _ => Phase::Outputs,
        }
    }

    /// As reports write it, for a plan of `stages` stages.
    pub fn describe(self, stages: usize) -> String {
        match self {
            Phase::Idle => "outside any GPU stage".into(),
            Phase::Setup(what) => format!("setup ({what})"),
            Phase::Init => format!("slot initialisation (before stage 1/{stages})"),
            Phase::Stage(s) => format!("stage {}/{stages}", s + 1),
            Phase::Outputs => format!("output gather (after stage {stages}/{stages})"),
        }
    }
}

/// The ranks a process drives, for reports: `rank 0 (pid 4242, GPU 0)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Who {
    pub ranks: Vec<usize>,
    /// The GPU of each rank (same order).
    pub gpus: Vec<usize>,
    pub pid: u32,
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut gpus = self.gpus.clone();
        gpus.dedup();
        let r = if self.ranks.len() == 1 {
            "rank"
        } else {
            "ranks"
        };
        let g = if gpus.len() == 1 { "GPU" } else { "GPUs" };
        if self.ranks.is_empty() {
            return write!(f, "process (pid {})", self.pid);
        }
        write!(
            f,
            "{r} {} (pid {}, {g} {})",
            list(&self.ranks),
            self.pid,
            list(&gpus)
        )
    }
}

/// Why a process gave up.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// The device made no progress (no mark completed) for `secs` seconds.
    NoProgress { secs: f64, limit: f64 },
    /// The host thread made no progress for `secs` seconds (blocked in a call).
    HostBlocked {
        secs: f64,
        limit: f64,
        doing: String,
    },
    /// NCCL reported an asynchronous error.
    Nccl(String),
    /// A call of the run failed (e.g. `ncclGroupEnd` after a peer died).
    Failed(String),
    /// The process received a signal (SIGTERM from a launcher).
    Signal(&'static str),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::NoProgress { secs, limit } => write!(
                f,
                "no progress for {secs:.0} s (stage timeout {limit:.0} s): device work of this stage did not finish"
            ),
            Cause::HostBlocked { secs, limit, doing } => write!(
                f,
                "no progress for {secs:.0} s (limit {limit:.0} s): the host thread is blocked {doing}"
            ),
            Cause::Nccl(e) => write!(f, "NCCL reported an error: {e}"),
            Cause::Failed(e) => write!(f, "{e}"),
            Cause::Signal(s) => write!(
                f,
                "terminated by {s} (a launcher stops every process when one of them fails)"
            ),
        }
    }
}

/// A fault, as reported: `error: <who> <where>: <cause>; peers in this group: <peers>[; notes]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultReport {
    pub who: Who,
    /// Where, as [`Phase::describe`] writes it.
    pub at: String,
    pub cause: Cause,
    /// The ranks the stuck ranks exchange data with in that stage, described
    /// (`rank 1 (process 1)`); empty: none.
    pub peers: Vec<String>,
    /// Further facts (`unfinished: rank 0 transfer stream`, `NCCL communicators aborted`).
    pub notes: Vec<String>,
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error: {} {}: {}; peers in this group: {}",
            self.who,
            self.at,
            self.cause,
            if self.peers.is_empty() {
                "none (local work only)".to_string()
            } else {
                self.peers.join(", ")
            }
        )?;
        for n in &self.notes {
            write!(f, "; {n}")?;
        }
        Ok(())
    }
}
