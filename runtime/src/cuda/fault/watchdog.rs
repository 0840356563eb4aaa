//! Host liveness: the process-wide [`Progress`] (armed with a limit, beaten as the host goes)
//! and the [`Watchdog`] thread that ends a process whose host is blocked, or that got SIGTERM.

use super::report::{Cause, FaultReport, Phase, Who};
use super::DEFAULT_SETUP_TIMEOUT;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
    pub(super) fn report(&self, cause: Cause) -> String {
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

/// Prints `report` on stderr and ends the process with status 1 ([`exit_now`]). Printed
/// directly, not through `tracing`: these are the process's last words, whatever subscriber
/// the binary has (or none).
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
