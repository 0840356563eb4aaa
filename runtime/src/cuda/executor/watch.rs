//! Waiting for a run and its faults: progress marks polled against the stage deadline, the
//! fault report (aborting the transport), fault injection, and the final event wait.

use super::CudaExecutor;
use crate::cuda::error::{check, Result, RuntimeError};
use crate::cuda::fault::{self, Cause, FaultKind, FaultReport, FaultSpec, Phase, Who};
use crate::cuda::schedule::{self};
use crate::cuda::transport::Transport;
use cudarc::driver::CudaEvent;
use std::time::{Duration, Instant};

/// Why [`CudaExecutor::poll_marks`] stopped early.
pub(super) enum WaitErr {
    /// A CUDA error (the device faulted).
    Cuda(RuntimeError),
    /// An NCCL asynchronous error, described.
    Nccl(String),
}

impl CudaExecutor {
    /// Records the marks of phase index `phase` (0 = initialisation, 1..=stages, stages + 1 =
    /// outputs) on their streams; `enq` counts the marks recorded so far in this run.
    pub(super) fn record_marks(&self, phase: usize, enq: &mut usize) -> Result<()> {
        while *enq < self.marks.len() && self.tracker.mark(*enq).0 == phase {
            let (_, y) = self.tracker.mark(*enq);
            let (sy, _) = self.stream_and_event(y);
            self.marks[*enq]
                .record(sy)
                .map_err(RuntimeError::driver("record progress mark"))?;
            *enq += 1;
        }
        Ok(())
    }

    /// Polls the first `upto` marks until they complete (or a stall: no mark completing for
    /// the stage timeout), polling the transport's asynchronous errors on the way.
    pub(super) fn poll_marks(
        &mut self,
        upto: usize,
    ) -> std::result::Result<fault::WaitEnd, WaitErr> {
        struct Hooks<'a> {
            marks: &'a [CudaEvent],
            transport: &'a dyn Transport,
            progress: &'static fault::Progress,
        }
        impl fault::WaitHooks for Hooks<'_> {
            type Error = WaitErr;
            fn now(&mut self) -> Instant {
                Instant::now()
            }
            fn done(&mut self, i: usize) -> std::result::Result<bool, WaitErr> {
                self.marks[i].try_is_complete().map_err(|e| {
                    WaitErr::Cuda(RuntimeError::driver("device error while running the plan")(
                        e,
                    ))
                })
            }
            fn check(&mut self) -> std::result::Result<(), WaitErr> {
                match self.transport.async_error() {
                    Some(e) => Err(WaitErr::Nccl(e)),
                    None => Ok(()),
                }
            }
            fn beat(&mut self) {
                self.progress.beat();
            }
            fn sleep(&mut self, d: Duration) {
                std::thread::sleep(d);
            }
        }
        let mut hooks = Hooks {
            marks: &self.marks,
            transport: &*self.transport,
            progress: fault::progress(),
        };
        fault::wait_progress(&mut self.tracker, upto, self.opts.stage_timeout, &mut hooks)
    }

    /// [`CudaExecutor::poll_marks`], with a stall or an NCCL error turned into a fault.
    pub(super) fn wait_marks(&mut self, upto: usize) -> Result<()> {
        let limit = self.opts.stage_timeout.as_secs_f64();
        match self.poll_marks(upto) {
            Ok(fault::WaitEnd::Done) => Ok(()),
            Ok(fault::WaitEnd::Stalled {
                phase,
                streams,
                secs,
            }) => Err(self.fault(phase, &streams, Cause::NoProgress { secs, limit })),
            Err(WaitErr::Nccl(e)) => {
                let (phase, streams) = self
                    .tracker
                    .stalled_at(upto)
                    .unwrap_or((self.schedule.len() + 1, Vec::new()));
                Err(self.fault(phase, &streams, Cause::Nccl(e)))
            }
            // A device error: under NCCL the peers may wait on this process, so abort and
            // report where; alone, it is an ordinary error.
            Err(WaitErr::Cuda(e)) if self.transport.can_abort() => {
                let (phase, streams) = self
                    .tracker
                    .stalled_at(upto)
                    .unwrap_or((self.schedule.len() + 1, Vec::new()));
                Err(self.fault(phase, &streams, Cause::Failed(e.to_string())))
            }
            Err(WaitErr::Cuda(e)) => Err(e),
        }
    }

    /// The fault report of a stall in mark phase `phase` with `streams` unfinished; aborts the
    /// transport (NCCL communicators) and marks the executor faulted.
    pub(super) fn fault(&mut self, phase: usize, streams: &[usize], cause: Cause) -> RuntimeError {
        let n = self.ranks.len();
        let stages = self.schedule.len();
        let mut ranks: Vec<usize> = streams.iter().map(|y| y % n).collect();
        ranks.sort_unstable();
        ranks.dedup();
        if ranks.is_empty() {
            ranks = self.who.ranks.clone();
        }
        let at = Phase::from_index(phase, stages);
        let peers = match at {
            Phase::Stage(si) => schedule::stage_partners(&self.schedule.stages[si], &ranks)
                .into_iter()
                .map(|r| self.labels[r].clone())
                .collect(),
            _ => Vec::new(),
        };
        let mut notes = Vec::new();
        if !streams.is_empty() {
            let what: Vec<String> = streams
                .iter()
                .map(|y| {
                    if *y < n {
                        format!("rank {y} compute stream")
                    } else {
                        format!("rank {} transfer stream", y - n)
                    }
                })
                .collect();
            notes.push(format!("unfinished: {}", what.join(", ")));
        }
        if let Some(f) = self.opts.fault.filter(|_| self.injected) {
            notes.push(format!("fault injected here: {f}"));
        }
        let mut report = FaultReport {
            who: Who {
                gpus: ranks.iter().map(|r| self.rank_device(*r)).collect(),
                ranks,
                pid: std::process::id(),
            },
            at: at.describe(stages),
            cause,
            peers,
            notes,
        };
        // If the abort blocks (it should not), the watchdog prints this report and exits.
        let progress = fault::progress();
        progress.set_pending(Some(report.to_string()));
        progress.set_limit(fault::ABORT_LIMIT);
        report.notes.extend(self.transport.abort());
        progress.set_pending(None);
        self.faulted = true;
        RuntimeError::Fault(Box::new(report))
    }

    /// The injected fault if it is due before stage `si` and this process drives its rank.
    pub(super) fn due_fault(&self, si: usize) -> Option<FaultSpec> {
        let f = self.opts.fault?;
        let here = self.ranks.get(f.rank).is_some_and(|r| r.local);
        (!self.injected && here && f.stage == si + 1 && f.run == self.runs).then_some(f)
    }

    /// Injects `f` before stage `si` (`enq` marks are enqueued); see `cuda::fault`.
    pub(super) fn inject(&mut self, f: FaultSpec, si: usize, enq: usize) -> Result<()> {
        use cudarc::driver::sys;
        self.injected = true;
        let stages = self.schedule.len();
        let me = format!(
            "rank {} (pid {}) at unix time {:.3}",
            f.rank,
            std::process::id(),
            fault::unix_time()
        );
        let progress = fault::progress();
        match f.kind {
            FaultKind::Exit => {
                // The earlier stages finish on the device first, so that the peers stop
                // exactly at this stage (a stall here is ignored: the process dies anyway).
                progress.doing("in the injected fault (exit): waiting for the earlier stages");
                let _ = self.poll_marks(enq);
                tracing::warn!(
                    "fault injection {f}: {me} kills its process with SIGKILL before stage {}/{stages}",
                    si + 1
                );
                fault::kill_self()
            }
            FaultKind::Hang => {
                let word =
                    self.hang_word.as_ref().map(|(_, p)| *p).ok_or_else(|| {
                        RuntimeError::Unsupported("no hang word allocated".into())
                    })?;
                let streams = [
                    self.ranks[f.rank].compute.clone(),
                    self.transfer_streams[f.rank].clone(),
                ];
                /// Fallback where stream memory operations are unavailable: a host function
                /// that never returns holds the stream.
                unsafe extern "C" fn block_forever(_: *mut std::ffi::c_void) {
                    loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                }
                for st in &streams {
                    st.context()
                        .bind_to_thread()
                        .map_err(RuntimeError::driver("bind context"))?;
                    // SAFETY: `word` is a live 4-byte-aligned device word of this rank's device
                    // that stays 0; the stream waits until it is >= 1, i.e. forever.
                    let r = unsafe {
                        sys::cuStreamWaitValue32_v2(
                            st.cu_stream(),
                            word,
                            1,
                            sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                        )
                    };
                    if r != sys::CUresult::CUDA_SUCCESS {
                        // SAFETY: a host function without data on a live stream.
                        check(
                            unsafe {
                                sys::cuLaunchHostFunc(
                                    st.cu_stream(),
                                    Some(block_forever),
                                    std::ptr::null_mut(),
                                )
                            },
                            "cuLaunchHostFunc (injected hang)",
                        )?;
                    }
                }
                tracing::warn!(
                    "fault injection {f}: the streams of {me} wait forever from stage {}/{stages} on (device-side hang)",
                    si + 1
                );
                Ok(())
            }
            FaultKind::HostHang => {
                tracing::warn!(
                    "fault injection {f}: the host thread of {me} blocks forever before stage {}/{stages}",
                    si + 1
                );
                progress.doing("in the injected fault (host-hang): the host thread sleeps forever");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        }
    }

    /// Polls `ev` until it completes, an error surfaces, or the timeout passes.
    pub(super) fn wait_for(&self, ev: &CudaEvent, what: &str) -> Result<()> {
        let start = Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            if ev
                .try_is_complete()
                .map_err(RuntimeError::driver("device error while running the plan"))?
            {
                return Ok(());
            }
            if start.elapsed() > self.opts.timeout {
                return Err(RuntimeError::Timeout {
                    what: what.to_string(),
                    secs: start.elapsed().as_secs_f64(),
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
    }
}
