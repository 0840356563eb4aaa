//! Faults: progress deadlines, the watchdog, fault injection and the one-line fault report.
//!
//! A rank that dies or hangs must end every process of the job within a bounded time, with a
//! message naming the rank and the stage. Two mechanisms share the work:
//!
//! * **Device progress** (the executor's wait, [`wait_progress`]): every stream that has work in
//!   a stage records a *mark* event after it; the host polls the marks (never a blocking
//!   synchronize) and calls it progress whenever one completes. When no mark completes for the
//!   stage timeout, the run ends with a [`FaultReport`] naming the first stage with unfinished
//!   work and the ranks whose streams did not finish it (their earlier work, hence everything
//!   they waited on, is complete: they are stuck in their own work of that stage, e.g. an NCCL
//!   receive from a dead peer). The NCCL transport is polled for asynchronous errors
//!   (`ncclCommGetAsyncError`) on the way and aborted (`ncclCommAbort`) on a fault.
//! * **Host liveness** ([`Watchdog`]): the host can block inside a call (NCCL bootstrap,
//!   `ncclCommSplit`, a first `ncclGroupEnd` that connects to a hung peer, a full launch
//!   queue). The executor and the launcher *arm* the process-wide [`Progress`] with a limit and
//!   *beat* it as they go; a watchdog thread that sees no beat for the limit prints the report
//!   and ends the process with `_exit(1)` (no destructors, no CUDA teardown that could block:
//!   the driver reclaims the GPU when the process ends, as after SIGKILL). It also turns
//!   SIGTERM (what torchrun sends to the survivors when one worker fails) into the same report.
//!
//! The report's first line has a fixed shape that scripts grep for:
//!
//! ```text
//! error: rank 0 (pid 4242, GPU 0) stage 2/8: no progress for 10 s (stage timeout 10 s); peers in this group: rank 1 (process 1); ...
//! ```
//!
//! Fault injection ([`FaultSpec`], `mercury-run --inject-fault`) makes the faults reproducible
//! without outside timing: `exit-rank=R@stage=S` (the process of rank R kills itself with
//! SIGKILL before stage S), `hang-rank=R@stage=S` (rank R's streams wait forever on a device
//! word before stage S: a device-side hang) and `host-hang-rank=R@stage=S` (the host thread of
//! rank R's process blocks forever before stage S); `@run=K` picks the executor's K-th run
//! (default the first; a later run has its NCCL connections established, so the peers' NCCL
//! kernels are already spinning when the fault strikes). Stages and runs count from 1, as in
//! reports.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Default progress deadline of a stage (no mark completing for this long is a fault).
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default limit of a blocking setup step (NCCL bootstrap, communicator split).
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// What the watchdog adds to a stage timeout before it ends a process whose host is blocked,
/// so that the executor's own (cleaner) report and `ncclCommAbort` come first when they can.
pub const WATCHDOG_GRACE: Duration = Duration::from_secs(5);
/// How long the handling of a fault (`ncclCommAbort`) may block before the watchdog ends the
/// process with the report it was handling.
pub const ABORT_LIMIT: Duration = Duration::from_secs(10);

// ---- fault injection ---------------------------------------------------------------------

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The process driving the rank kills itself with SIGKILL (after its earlier stages have
    /// finished on the device).
    Exit,
    /// The rank's compute and transfer streams wait forever on a device word: every later
    /// operation of the rank stays queued (a device-side hang).
    Hang,
    /// The host thread of the rank's process blocks forever before enqueuing the stage.
    HostHang,
}

/// A fault to inject: `kind` on `rank` before stage `stage` of run `run` (both 1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub rank: usize,
    /// 1-based, as stages appear in reports.
    pub stage: usize,
    /// 1-based: the executor's first run is 1.
    pub run: usize,
}

const SPEC_FORMS: &str = "exit-rank=R@stage=S, hang-rank=R@stage=S or host-hang-rank=R@stage=S, optionally followed by @run=K (S and K count from 1)";

impl FaultSpec {
    /// Parses `exit-rank=R@stage=S`, `hang-rank=R@stage=S` or `host-hang-rank=R@stage=S`,
    /// optionally followed by `@run=K`.
    ///
    /// # Errors
    /// A message quoting the text and listing the accepted forms.
    pub fn parse(text: &str) -> Result<FaultSpec, String> {
        let t = text.trim();
        let bad = |why: &str| format!("fault '{t}': {why}; expected {SPEC_FORMS}");
        let (who, at) = t.split_once('@').ok_or_else(|| bad("no '@stage=S'"))?;
        let (at, run) = match at.split_once('@') {
            Some((a, r)) => {
                let r = r
                    .strip_prefix("run=")
                    .ok_or_else(|| bad("the part after the second '@' must be 'run=K'"))?;
                let k = r
                    .parse::<usize>()
                    .map_err(|_| bad(&format!("run '{r}' is not a number")))?;
                if k == 0 {
                    return Err(bad("runs count from 1"));
                }
                (a, k)
            }
            None => (at, 1),
        };
        let (kind, rank) = who
            .split_once("-rank=")
            .ok_or_else(|| bad("no '-rank=R'"))?;
        let kind = match kind {
            "exit" => FaultKind::Exit,
            "hang" => FaultKind::Hang,
            "host-hang" => FaultKind::HostHang,
            k => return Err(bad(&format!("unknown kind '{k}'"))),
        };
        let rank = rank
            .parse::<usize>()
            .map_err(|_| bad(&format!("rank '{rank}' is not a number")))?;
        let stage = at
            .strip_prefix("stage=")
            .ok_or_else(|| bad("the part after '@' must be 'stage=S'"))?;
        let stage = stage
            .parse::<usize>()
            .map_err(|_| bad(&format!("stage '{stage}' is not a number")))?;
        if stage == 0 {
            return Err(bad("stages count from 1"));
        }
        Ok(FaultSpec {
            kind,
            rank,
            stage,
            run,
        })
    }

    /// Checks the fault against a plan of `ranks` ranks and `stages` stages.
    ///
    /// # Errors
    /// The rank or the stage does not exist.
    pub fn validate(&self, ranks: usize, stages: usize) -> Result<(), String> {
        if self.rank >= ranks {
            return Err(format!(
                "fault {self}: the plan has ranks 0..{}",
                ranks.saturating_sub(1)
            ));
        }
        if self.stage > stages {
            return Err(format!("fault {self}: the plan has stages 1..{stages}"));
        }
        Ok(())
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            FaultKind::Exit => "exit",
            FaultKind::Hang => "hang",
            FaultKind::HostHang => "host-hang",
        };
        write!(f, "{k}-rank={}@stage={}", self.rank, self.stage)?;
        if self.run != 1 {
            write!(f, "@run={}", self.run)?;
        }
        Ok(())
    }
}

// ---- where a process is ------------------------------------------------------------------

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

// ---- device progress: marks --------------------------------------------------------------

/// The marks of one run (events recorded after each stream's work of a phase), in enqueue
/// order, and how far each stream has got. Pure bookkeeping: the caller says whether a mark
/// completed.
#[derive(Debug, Clone)]
pub struct MarkTracker {
    /// (phase index, stream) of each mark.
    marks: Vec<(usize, usize)>,
    /// Per stream (sorted by stream id): the marks in order, and the next unfinished one.
    streams: Vec<(usize, Vec<usize>, usize)>,
}

impl MarkTracker {
    /// `marks[i]` = (phase index, stream id) of mark `i`; a stream's marks must appear in the
    /// order the stream runs them (phase indices non-decreasing per stream).
    pub fn new(marks: Vec<(usize, usize)>) -> MarkTracker {
        let mut by: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for (i, (_, s)) in marks.iter().enumerate() {
            by.entry(*s).or_default().push(i);
        }
        MarkTracker {
            marks,
            streams: by.into_iter().map(|(s, v)| (s, v, 0)).collect(),
        }
    }

    /// Number of marks.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// No marks at all.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// (phase index, stream id) of mark `i`.
    pub fn mark(&self, i: usize) -> (usize, usize) {
        self.marks[i]
    }

    /// Every mark unfinished again (a new run).
    pub fn reset(&mut self) {
        for s in &mut self.streams {
            s.2 = 0;
        }
    }

    /// Queries, per stream, its next unfinished mark below `upto` (and the following ones
    /// while they are complete: a stream finishes its marks in order); returns whether any
    /// mark completed.
    ///
    /// # Errors
    /// The first error of `done`.
    pub fn poll<E>(
        &mut self,
        upto: usize,
        mut done: impl FnMut(usize) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let mut moved = false;
        for (_, marks, next) in &mut self.streams {
            while *next < marks.len() && marks[*next] < upto {
                if done(marks[*next])? {
                    *next += 1;
                    moved = true;
                } else {
                    break;
                }
            }
        }
        Ok(moved)
    }

    /// Whether every mark below `upto` has completed.
    pub fn finished(&self, upto: usize) -> bool {
        self.streams
            .iter()
            .all(|(_, m, next)| *next >= m.len() || m[*next] >= upto)
    }

    /// The first phase with an unfinished mark below `upto`, and the streams unfinished in it.
    pub fn stalled_at(&self, upto: usize) -> Option<(usize, Vec<usize>)> {
        let pending: Vec<(usize, usize)> = self
            .streams
            .iter()
            .filter(|(_, m, next)| *next < m.len() && m[*next] < upto)
            .map(|(s, m, next)| (self.marks[m[*next]].0, *s))
            .collect();
        let first = pending.iter().map(|p| p.0).min()?;
        Some((
            first,
            pending
                .into_iter()
                .filter(|p| p.0 == first)
                .map(|p| p.1)
                .collect(),
        ))
    }
}

/// How [`wait_progress`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitEnd {
    /// Every mark below `upto` completed.
    Done,
    /// No mark completed for the stage timeout: the first unfinished phase, its unfinished
    /// streams, and how long nothing moved.
    Stalled {
        phase: usize,
        streams: Vec<usize>,
        secs: f64,
    },
}

/// What [`wait_progress`] calls back into: the clock, the mark queries, extra checks (NCCL
/// errors), the heartbeat and the nap. A trait so that tests can drive it with a fake clock.
pub trait WaitHooks {
    type Error;
    fn now(&mut self) -> Instant;
    /// Whether mark `i` has completed (an error: a device fault).
    fn done(&mut self, i: usize) -> Result<bool, Self::Error>;
    /// Called about every 50 ms of waiting (NCCL asynchronous errors).
    fn check(&mut self) -> Result<(), Self::Error>;
    /// Called every iteration (the host is alive).
    fn beat(&mut self);
    fn sleep(&mut self, d: Duration);
}

/// Polls the marks below `upto` until all complete, or until none completes for `limit`.
/// Naps start at 20 us and double up to 2 ms.
///
/// # Errors
/// The first error of a hook.
pub fn wait_progress<H: WaitHooks>(
    tracker: &mut MarkTracker,
    upto: usize,
    limit: Duration,
    hooks: &mut H,
) -> Result<WaitEnd, H::Error> {
    let mut last = hooks.now();
    let mut last_check = last;
    let mut nap = Duration::from_micros(20);
    loop {
        hooks.beat();
        let moved = tracker.poll(upto, |i| hooks.done(i))?;
        if tracker.finished(upto) {
            return Ok(WaitEnd::Done);
        }
        let now = hooks.now();
        if moved {
            last = now;
            nap = Duration::from_micros(20);
        }
        if now.duration_since(last_check) >= Duration::from_millis(50) {
            hooks.check()?;
            last_check = now;
        }
        let idle = now.duration_since(last);
        if idle >= limit {
            let (phase, streams) = tracker.stalled_at(upto).unwrap_or((0, Vec::new()));
            return Ok(WaitEnd::Stalled {
                phase,
                streams,
                secs: idle.as_secs_f64(),
            });
        }
        hooks.sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}

// ---- host liveness: the process-wide progress and the watchdog ---------------------------

#[derive(Debug, Clone, Default)]
struct Status {
    phase: Phase,
    stages: usize,
    who: Arc<Who>,
    /// Per stage: the peers of this process's ranks in it (described).
    peers: Arc<Vec<Vec<String>>>,
    /// What the host is doing ("enqueueing", "in ncclCommSplit", ...).
    doing: &'static str,
    /// A report being handled (e.g. while `ncclCommAbort` runs).
    pending: Option<String>,
}

/// Where this process is and when its host thread last made progress (see the module docs).
#[derive(Debug)]
pub struct Progress {
    epoch: Instant,
    beat_ms: AtomicU64,
    /// Host-blocked limit of the current phase, ms; 0: disarmed.
    limit_ms: AtomicU64,
    setup_ms: AtomicU64,
    status: Mutex<Status>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            epoch: Instant::now(),
            beat_ms: AtomicU64::new(0),
            limit_ms: AtomicU64::new(0),
            setup_ms: AtomicU64::new(DEFAULT_SETUP_TIMEOUT.as_millis() as u64),
            status: Mutex::new(Status::default()),
        }
    }
}

/// Disarms the [`Progress`] it came from when dropped.
#[must_use = "the watchdog is disarmed when the guard drops"]
pub struct Armed<'a>(&'a Progress);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.0.disarm();
    }
}

impl Progress {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn with<R>(&self, f: impl FnOnce(&mut Status) -> R) -> R {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        let mut g = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    /// The host made progress.
    pub fn beat(&self) {
        self.beat_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Arms the watchdog: from now on, `limit` without a beat ends the process (if a
    /// [`Watchdog`] runs).
    pub fn arm(&self, phase: Phase, limit: Duration, doing: &'static str) -> Armed<'_> {
        self.enter(phase, doing);
        self.limit_ms
            .store(limit.as_millis().max(1) as u64, Ordering::Relaxed);
        Armed(self)
    }

    /// Disarms the watchdog.
    pub fn disarm(&self) {
        self.limit_ms.store(0, Ordering::Relaxed);
        self.with(|s| {
            s.phase = Phase::Idle;
            s.pending = None;
        });
    }

    /// Moves to `phase` (and beats).
    pub fn enter(&self, phase: Phase, doing: &'static str) {
        self.with(|s| {
            s.phase = phase;
            s.doing = doing;
        });
        self.beat();
    }

    /// Says what the host does now, without changing the phase (and beats).
    pub fn doing(&self, doing: &'static str) {
        self.with(|s| s.doing = doing);
        self.beat();
    }

    /// Who this process is, the plan's stage count and each stage's peers (for reports).
    pub fn set_context(&self, who: Arc<Who>, stages: usize, peers: Arc<Vec<Vec<String>>>) {
        self.with(|s| {
            s.who = who;
            s.stages = stages;
            s.peers = peers;
        });
    }

    /// Changes the limit of the armed phase (no effect when disarmed) and beats.
    pub fn set_limit(&self, limit: Duration) {
        let ms = limit.as_millis().max(1) as u64;
        let _ = self
            .limit_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (cur != 0).then_some(ms)
            });
        self.beat();
    }

    /// A report the process is handling (the watchdog prints it if the handling blocks).
    pub fn set_pending(&self, report: Option<String>) {
        self.with(|s| s.pending = report);
        self.beat();
    }

    /// The limit of blocking setup steps.
    pub fn setup_timeout(&self) -> Duration {
        Duration::from_millis(self.setup_ms.load(Ordering::Relaxed))
    }

    /// Sets the limit of blocking setup steps.
    pub fn set_setup_timeout(&self, d: Duration) {
        self.setup_ms
            .store(d.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// The report of a host blocked for `idle` (limit `limit`), or of a signal.
    fn report(&self, cause: Cause) -> String {
        self.with(|s| {
            if let Some(p) = &s.pending {
                return format!("{p}; then the host thread blocked in the handling ({cause})");
            }
            let peers = match s.phase {
                Phase::Stage(i) => s.peers.get(i).cloned().unwrap_or_default(),
                Phase::Setup(_) => vec!["every other process of the job".into()],
                _ => Vec::new(),
            };
            let mut who = (*s.who).clone();
            if who.pid == 0 {
                who.pid = std::process::id();
            }
            FaultReport {
                who,
                at: s.phase.describe(s.stages),
                cause,
                peers,
                notes: Vec::new(),
            }
            .to_string()
        })
    }

    /// `Some(report)` when armed and the host has not beaten for longer than the limit.
    pub fn check_host(&self) -> Option<String> {
        let limit = self.limit_ms.load(Ordering::Relaxed);
        if limit == 0 {
            return None;
        }
        let idle = self
            .now_ms()
            .saturating_sub(self.beat_ms.load(Ordering::Relaxed));
        if idle <= limit {
            return None;
        }
        // Re-check under the lock's ordering: a beat may have landed meanwhile.
        if self.limit_ms.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let doing = self.with(|s| s.doing);
        Some(self.report(Cause::HostBlocked {
            secs: idle as f64 / 1e3,
            limit: limit as f64 / 1e3,
            doing: if doing.is_empty() {
                "in a call".into()
            } else {
                doing.to_string()
            },
        }))
    }
}

/// The process-wide [`Progress`] the executor, the launcher and the watchdog share.
pub fn progress() -> &'static Progress {
    static P: OnceLock<Progress> = OnceLock::new();
    P.get_or_init(Progress::default)
}

static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_sig: libc::c_int) {
    // Async-signal-safe: one atomic store; the watchdog thread does the rest.
    TERM.store(true, Ordering::SeqCst);
}

/// Flushes stdout and stderr and ends the process at once with `code`, without destructors or
/// exit handlers (which could block on a GPU that still runs stuck work; the driver reclaims
/// the GPU when the process ends).
pub fn exit_now(code: i32) -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process; nothing runs after it.
    unsafe { libc::_exit(code) }
}

/// Seconds since the Unix epoch (for messages that scripts compare with their own clocks).
pub fn unix_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Sends SIGKILL to this process (an injected `exit` fault: no cleanup at all, as when a
/// launcher's worker is killed); falls back to [`exit_now`] with 137.
pub fn kill_self() -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: plain system calls on this process.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    exit_now(137)
}

/// Prints `report` on stderr and ends the process with status 1 ([`exit_now`]).
pub fn die(report: &str) -> ! {
    eprintln!("{report}");
    exit_now(1)
}

/// The watchdog thread of this process (see the module docs). Started once; later calls do
/// nothing.
pub struct Watchdog;

impl Watchdog {
    /// Starts the watchdog over [`progress`] and turns SIGTERM into a report (exit status 1).
    ///
    /// # Errors
    /// The thread cannot be spawned or the handler cannot be installed.
    pub fn start() -> Result<(), String> {
        static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
        STARTED
            .get_or_init(|| {
                // SAFETY: a plain sigaction with a handler that only stores an atomic.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_sigterm as *const () as libc::sighandler_t;
                    libc::sigemptyset(&mut sa.sa_mask);
                    sa.sa_flags = libc::SA_RESTART;
                    if libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut()) != 0 {
                        return Err(format!(
                            "cannot install the SIGTERM handler: {}",
                            std::io::Error::last_os_error()
                        ));
                    }
                }
                std::thread::Builder::new()
                    .name("mercury-watchdog".into())
                    .spawn(|| loop {
                        std::thread::sleep(Duration::from_millis(20));
                        let p = progress();
                        if TERM.load(Ordering::SeqCst) {
                            die(&p.report(Cause::Signal("SIGTERM")));
                        }
                        if let Some(r) = p.check_host() {
                            die(&r);
                        }
                    })
                    .map(|_| ())
                    .map_err(|e| format!("cannot start the watchdog thread: {e}"))
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs() {
        let f = FaultSpec::parse("hang-rank=1@stage=2").unwrap();
        assert_eq!(
            f,
            FaultSpec {
                kind: FaultKind::Hang,
                rank: 1,
                stage: 2,
                run: 1
            }
        );
        assert_eq!(f.to_string(), "hang-rank=1@stage=2");
        let g = FaultSpec::parse("exit-rank=1@stage=2@run=3").unwrap();
        assert_eq!((g.kind, g.stage, g.run), (FaultKind::Exit, 2, 3));
        assert_eq!(g.to_string(), "exit-rank=1@stage=2@run=3");
        for t in [
            "exit-rank=0@stage=1",
            "host-hang-rank=3@stage=7",
            " hang-rank=1@stage=2 ",
            "hang-rank=1@stage=2@run=1",
        ] {
            let f = FaultSpec::parse(t).unwrap();
            assert_eq!(FaultSpec::parse(&f.to_string()).unwrap(), f);
        }
        assert_eq!(
            FaultSpec::parse("host-hang-rank=3@stage=7").unwrap().kind,
            FaultKind::HostHang
        );
        for (t, why) in [
            ("hang-rank=1", "no '@stage=S'"),
            ("hang=1@stage=2", "no '-rank=R'"),
            ("crash-rank=1@stage=2", "unknown kind 'crash'"),
            ("hang-rank=x@stage=2", "rank 'x'"),
            ("hang-rank=1@step=2", "'stage=S'"),
            ("hang-rank=1@stage=0", "count from 1"),
            ("hang-rank=1@stage=-2", "stage '-2'"),
            ("hang-rank=1@stage=2@try=2", "'run=K'"),
            ("hang-rank=1@stage=2@run=0", "runs count from 1"),
            ("hang-rank=1@stage=2@run=x", "run 'x'"),
        ] {
            let e = FaultSpec::parse(t).unwrap_err();
            assert!(
                e.contains(why) && e.contains("expected exit-rank"),
                "{t}: {e}"
            );
        }
        let f = FaultSpec::parse("exit-rank=1@stage=2").unwrap();
        assert!(f.validate(2, 2).is_ok());
        assert!(f.validate(1, 2).unwrap_err().contains("ranks 0..0"));
        assert!(f.validate(2, 1).unwrap_err().contains("stages 1..1"));
    }

    #[test]
    fn phases_and_reports() {
        assert_eq!(Phase::from_index(0, 8), Phase::Init);
        assert_eq!(Phase::from_index(1, 8), Phase::Stage(0));
        assert_eq!(Phase::from_index(8, 8), Phase::Stage(7));
        assert_eq!(Phase::from_index(9, 8), Phase::Outputs);
        assert_eq!(Phase::Stage(1).describe(8), "stage 2/8");
        assert!(Phase::Outputs.describe(8).contains("after stage 8/8"));
        assert!(Phase::Init.describe(8).contains("before stage 1/8"));
        let r = FaultReport {
            who: Who {
                ranks: vec![0],
                gpus: vec![0],
                pid: 4242,
            },
            at: Phase::Stage(1).describe(8),
            cause: Cause::NoProgress {
                secs: 10.04,
                limit: 10.0,
            },
            peers: vec!["rank 1 (process 1)".into()],
            notes: vec!["NCCL communicators aborted".into()],
        };
        let s = r.to_string();
        assert!(
            s.starts_with(
                "error: rank 0 (pid 4242, GPU 0) stage 2/8: no progress for 10 s (stage timeout 10 s)"
            ),
            "{s}"
        );
        assert!(s.contains("; peers in this group: rank 1 (process 1); NCCL communicators aborted"));
        let w = Who {
            ranks: vec![0, 1],
            gpus: vec![0, 0],
            pid: 7,
        };
        assert_eq!(w.to_string(), "ranks 0, 1 (pid 7, GPU 0)");
        let w = Who {
            ranks: vec![2, 3],
            gpus: vec![0, 1],
            pid: 7,
        };
        assert_eq!(w.to_string(), "ranks 2, 3 (pid 7, GPUs 0, 1)");
        let none = FaultReport {
            peers: vec![],
            cause: Cause::Signal("SIGTERM"),
            ..r
        };
        assert!(none
            .to_string()
            .contains("terminated by SIGTERM (a launcher stops every process"));
        assert!(none.to_string().contains("peers in this group: none"));
    }

    /// Marks of 2 ranks over init, 2 stages and outputs: streams 0, 1 compute, 2, 3 transfer.
    fn tracker() -> MarkTracker {
        MarkTracker::new(vec![
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 2),
            (1, 1),
            (1, 3),
            (2, 0),
            (2, 3),
            (2, 1),
            (3, 0),
            (3, 1),
        ])
    }

    #[test]
    fn tracker_follows_streams_in_order() {
        let mut t = tracker();
        assert_eq!(t.len(), 11);
        // Everything up to mark 5 done, except stream 3's stage-1 mark (5).
        let done = |i: usize| Ok::<_, ()>(i != 5 && i < 9);
        assert!(t.poll(11, done).unwrap());
        assert!(!t.finished(11));
        // Stream 3 is the only one stuck in phase 1; stream 0 and 1 went on to phase 3.
        assert_eq!(t.stalled_at(11), Some((1, vec![3])));
        // Below `upto` = 5 (marks 0..4 enqueued), everything is done.
        assert!(t.finished(5));
        // A later poll finishes everything.
        assert!(t.poll(11, |_| Ok::<_, ()>(true)).unwrap());
        assert!(t.finished(11));
        assert_eq!(t.stalled_at(11), None);
        // A stream never queries a mark after an unfinished one.
        t.reset();
        let mut asked = Vec::new();
        t.poll(11, |i| {
            asked.push(i);
            Ok::<_, ()>(false)
        })
        .unwrap();
        asked.sort();
        assert_eq!(asked, vec![0, 1, 3, 5]);
        // Errors pass through.
        assert_eq!(t.poll(11, |_| Err::<bool, _>("boom")), Err("boom"));
    }

    /// A fake clock: every call advances 1 ms; marks complete at given times.
    struct Fake {
        t0: Instant,
        ms: u64,
        done_at: Vec<Option<u64>>,
        checks: usize,
        beats: usize,
        fail_check_at: Option<u64>,
    }

    impl WaitHooks for Fake {
        type Error = String;
        fn now(&mut self) -> Instant {
            self.t0 + Duration::from_millis(self.ms)
        }
        fn done(&mut self, i: usize) -> Result<bool, String> {
            Ok(self.done_at[i].is_some_and(|t| t <= self.ms))
        }
        fn check(&mut self) -> Result<(), String> {
            self.checks += 1;
            match self.fail_check_at {
                Some(t) if self.ms >= t => Err(format!("nccl error at {}", self.ms)),
                _ => Ok(()),
            }
        }
        fn beat(&mut self) {
            self.beats += 1;
        }
        fn sleep(&mut self, d: Duration) {
            self.ms += d.as_millis().max(1) as u64;
        }
    }

    fn fake(done_at: Vec<Option<u64>>) -> Fake {
        Fake {
            t0: Instant::now(),
            ms: 0,
            done_at,
            checks: 0,
            beats: 0,
            fail_check_at: None,
        }
    }

    #[test]
    fn wait_ends_when_every_mark_completes() {
        let mut t = tracker();
        // Marks complete one every 500 ms: slower than nothing, faster than the 1 s limit.
        let mut h = fake((0..11).map(|i| Some(500 * i as u64)).collect());
        let end = wait_progress(&mut t, 11, Duration::from_secs(1), &mut h).unwrap();
        assert_eq!(end, WaitEnd::Done);
        assert!(h.ms >= 5000, "{}", h.ms);
        assert!(h.checks > 10 && h.beats > 10);
    }

    #[test]
    fn wait_reports_the_first_stalled_phase() {
        let mut t = tracker();
        // Stream 2's stage-1 mark (3) never completes; the rest by 100 ms (except what
        // follows mark 3 on stream 2: nothing).
        let mut done: Vec<Option<u64>> = vec![Some(100); 11];
        done[3] = None;
        let mut h = fake(done);
        let end = wait_progress(&mut t, 11, Duration::from_secs(2), &mut h).unwrap();
        match end {
            WaitEnd::Stalled {
                phase,
                streams,
                secs,
            } => {
                assert_eq!((phase, streams), (1, vec![2]));
                assert!((2.0..2.1).contains(&secs), "{secs}");
            }
            e => panic!("{e:?}"),
        }
        // The limit counts from the last completion: 100 ms + 2 s.
        assert!((2100..2200).contains(&h.ms), "{}", h.ms);
    }

    #[test]
    fn wait_passes_check_errors() {
        let mut t = tracker();
        let mut h = fake(vec![None; 11]);
        h.fail_check_at = Some(300);
        let e = wait_progress(&mut t, 11, Duration::from_secs(60), &mut h).unwrap_err();
        assert!(e.starts_with("nccl error at"));
        assert!(h.ms < 400);
    }

    /// The child side of the two tests below (ignored in ordinary runs; they start it in a
    /// process of its own, as `--ignored --exact` with `MERCURY_WATCHDOG_CHILD` set).
    #[test]
    #[ignore = "helper: runs only as the child process of the watchdog tests"]
    fn watchdog_child() {
        let mode = std::env::var("MERCURY_WATCHDOG_CHILD").unwrap_or_default();
        if mode.is_empty() {
            return;
        }
        Watchdog::start().unwrap();
        let p = progress();
        p.set_context(
            Arc::new(Who {
                ranks: vec![3],
                gpus: vec![1],
                pid: std::process::id(),
            }),
            4,
            Arc::new(vec![
                vec![],
                vec!["rank 2 (process 1)".into()],
                vec![],
                vec![],
            ]),
        );
        let limit = if mode == "block" {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(60)
        };
        let _g = p.arm(Phase::Stage(1), limit, "in a call that never returns");
        println!("ready");
        use std::io::Write as _;
        std::io::stdout().flush().unwrap();
        // A host thread blocked in a call: only the watchdog can end this process.
        std::thread::sleep(Duration::from_secs(30));
        panic!("the watchdog did not end the process within 30 s");
    }

    /// Runs [`watchdog_child`] in `mode`; with `term`, sends it SIGTERM once it is ready.
    fn child(mode: &str) -> (Option<i32>, String, Duration) {
        use std::io::BufRead as _;
        let t = Instant::now();
        let mut c = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "cuda::fault::tests::watchdog_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MERCURY_WATCHDOG_CHILD", mode)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = c.stdout.take().unwrap();
        for line in std::io::BufReader::new(out).lines() {
            if line.unwrap().contains("ready") {
                break;
            }
        }
        if mode == "term" {
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        }
        let o = c.wait_with_output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            t.elapsed(),
        )
    }

    /// A host blocked past the limit: the watchdog prints the report and exits with 1.
    #[test]
    fn watchdog_ends_a_blocked_process() {
        let (code, err, took) = child("block");
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("error: rank 3 (pid ")
                && err.contains(", GPU 1) stage 2/4: no progress for"),
            "{err}"
        );
        assert!(err.contains("the host thread is blocked in a call that never returns; peers in this group: rank 2 (process 1)"), "{err}");
        assert!(took < Duration::from_secs(25), "{took:?}");
    }

    /// SIGTERM (a launcher stopping the survivors) becomes the report and exit status 1.
    #[test]
    fn sigterm_becomes_a_report() {
        let (code, err, took) = child("term");
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("stage 2/4: terminated by SIGTERM"), "{err}");
        assert!(took < Duration::from_secs(25), "{took:?}");
    }

    #[test]
    fn watchdog_progress_bookkeeping() {
        let p = Progress::default();
        // Disarmed: never a report.
        assert!(p.check_host().is_none());
        p.set_context(
            Arc::new(Who {
                ranks: vec![1],
                gpus: vec![1],
                pid: 99,
            }),
            4,
            Arc::new(vec![
                vec![],
                vec!["rank 0 (process 0)".into()],
                vec![],
                vec![],
            ]),
        );
        {
            // Generous limits where the test expects no report (a loaded CI machine may
            // deschedule this thread for a while), tight ones where it expects one.
            let _g = p.arm(Phase::Stage(1), Duration::from_secs(30), "enqueueing");
            assert!(p.check_host().is_none());
            p.set_limit(Duration::from_millis(30));
            std::thread::sleep(Duration::from_millis(80));
            let r = p.check_host().expect("blocked past the limit");
            assert!(
                r.starts_with("error: rank 1 (pid 99, GPU 1) stage 2/4: no progress for"),
                "{r}"
            );
            assert!(r.contains("the host thread is blocked enqueueing"), "{r}");
            assert!(r.contains("peers in this group: rank 0 (process 0)"), "{r}");
            p.set_limit(Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(80));
            assert!(p.check_host().is_none(), "the new limit applies");
            p.set_limit(Duration::from_millis(30));
            p.set_pending(Some("error: rank 1 ... (earlier report)".into()));
            std::thread::sleep(Duration::from_millis(80));
            let r = p.check_host().unwrap();
            assert!(
                r.starts_with("error: rank 1 ... (earlier report); then the host thread blocked"),
                "{r}"
            );
        }
        // The guard disarmed it, and a new limit does not re-arm it.
        p.set_limit(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(40));
        assert!(p.check_host().is_none());
        assert_eq!(p.setup_timeout(), DEFAULT_SETUP_TIMEOUT);
        p.set_setup_timeout(Duration::from_secs(7));
        assert_eq!(p.setup_timeout(), Duration::from_secs(7));
        let s = p.report(Cause::Signal("SIGTERM"));
        assert!(
            s.contains("outside any GPU stage: terminated by SIGTERM"),
            "{s}"
        );
    }
}
