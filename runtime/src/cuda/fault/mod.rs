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

//!
//! Files: `inject.rs` (fault specs), `report.rs` (phases and the report), `marks.rs` (device
//! progress), `watchdog.rs` (host liveness).

use std::time::Duration;

mod inject;
mod marks;
mod report;
#[cfg(test)]
mod tests;
mod watchdog;

pub use inject::{FaultKind, FaultSpec};
pub use marks::{wait_progress, MarkTracker, WaitEnd, WaitHooks};
pub use report::{Cause, FaultReport, Phase, Who};
pub use watchdog::{die, exit_now, kill_self, progress, unix_time, Armed, Progress, Watchdog};

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
