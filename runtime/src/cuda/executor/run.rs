//! The run loop: slot initialisation, the stages (compute on each rank's stream, transfers
//! through the transport) ordered by barriers or point-to-point waits, the output gather.

use super::{CudaExecutor, InitLaunch, RunTiming};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::fault::{self, Cause, Phase};
use crate::cuda::mem::{self, CopyCx};
use crate::cuda::ops::{self, Patches};
use crate::cuda::schedule::StageSync;
use crate::cuda::transport::TransferCx;
use cudarc::driver::{CudaEvent, CudaStream};
use mercury_plan::Role;

impl CudaExecutor {
    /// Every local rank stream records, the hub waits on all and records the barrier, every
    /// local rank stream waits on the barrier (events of other devices included: stream waits
    /// cross devices).
    pub(super) fn barrier(&self) -> Result<()> {
        for (r, t) in self.ranks.iter().zip(&self.transfer_streams) {
            if !r.local {
                continue;
            }
            r.ev_compute
                .record(&r.compute)
                .map_err(RuntimeError::driver("record"))?;
            r.ev_transfer
                .record(t)
                .map_err(RuntimeError::driver("record"))?;
            self.hub
                .wait(&r.ev_compute)
                .map_err(RuntimeError::driver("wait"))?;
            self.hub
                .wait(&r.ev_transfer)
                .map_err(RuntimeError::driver("wait"))?;
        }
        self.ev_barrier
            .record(&self.hub)
            .map_err(RuntimeError::driver("record barrier"))?;
        self.wait_barrier()
    }

    /// Stream `id` of the `schedule::compute_stream` / `transfer_stream` numbering, with the
    /// event it records under [`StageSync::Peers`].
    pub(super) fn stream_and_event(&self, id: usize) -> (&CudaStream, &CudaEvent) {
        let n = self.ranks.len();
        if id < n {
            (&self.ranks[id].compute, &self.ranks[id].ev_compute)
        } else {
            (
                &self.transfer_streams[id - n],
                &self.ranks[id - n].ev_transfer,
            )
        }
    }

    /// Before stage `si` under [`StageSync::Peers`]: each stream waits on the events of the
    /// streams that earlier touched the ranks it touches.
    pub(super) fn peer_wait(&self, si: usize) -> Result<()> {
        for &(y, x) in &self.peer[si].waits {
            let (sy, _) = self.stream_and_event(y);
            let (_, ex) = self.stream_and_event(x);
            sy.wait(ex).map_err(RuntimeError::driver("wait peer"))?;
        }
        Ok(())
    }

    /// After stage `si` under [`StageSync::Peers`]: the streams with work record their event.
    pub(super) fn peer_record(&self, si: usize) -> Result<()> {
        for &y in &self.peer[si].record {
            let (sy, ey) = self.stream_and_event(y);
            ey.record(sy).map_err(RuntimeError::driver("record peer"))?;
        }
        Ok(())
    }

    pub(super) fn wait_barrier(&self) -> Result<()> {
        for (r, t) in self.ranks.iter().zip(&self.transfer_streams) {
            if !r.local {
                continue;
            }
            r.compute
                .wait(&self.ev_barrier)
                .map_err(RuntimeError::driver("wait barrier"))?;
            t.wait(&self.ev_barrier)
                .map_err(RuntimeError::driver("wait barrier"))?;
        }
        Ok(())
    }

    fn init_rank(&mut self, ri: usize) -> Result<()> {
        let r = &mut self.ranks[ri];
        r.compute
            .context()
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
        let mut cx = CopyCx {
            stream: &r.compute,
            scratch: &mut r.scratch,
            dk: &self.dks[r.dev],
            max_pitch: self.max_pitch[r.dev],
            peers: self.peers.as_ref(),
            here: self.devs[r.dev].id,
        };
        for (si, init) in r.init.iter().enumerate() {
            if r.skip_init.get(si).copied().unwrap_or(false) {
                // Its readers read the bound input where it is (`direct.rs`).
                continue;
            }
            let info = &self.mem.ranks[ri][si];
            let bytes = info.shape.iter().product::<usize>() * info.dtype.size_bytes();
            cx.scratch.reset();
            // SAFETY: the slot allocation holds `bytes`; locations were resolved
            // against it and the global buffers.
            unsafe {
                match init {
                    InitLaunch::Copy { src, dst } => mem::copy(&mut cx, src, dst)?,
                    InitLaunch::Copies(copies) => {
                        for (src, dst) in copies {
                            cx.scratch.reset();
                            mem::copy(&mut cx, src, dst)?;
                        }
                    }
                    InitLaunch::Zero => mem::zero(cx.stream, info.ptr, bytes)?,
                    InitLaunch::NegInf(l) => {
                        mem::fill_pattern(cx.stream, l, mem::neg_inf_pattern(l.dtype)?)?
                    }
                    InitLaunch::Poison => mem::poison(cx.stream, info.ptr, bytes, info.dtype)?,
                    InitLaunch::Nothing => {}
                }
            }
        }
        Ok(())
    }

    /// Runs the plan once: initialises slots, runs every stage, gathers the outputs, and
    /// waits for the devices by polling the progress marks ([`CudaExecutor::launch`] on the
    /// executor's own streams, then [`CudaExecutor::wait`]).
    ///
    /// # Errors
    /// [`RuntimeError::Fault`] when no stream finishes its work of a stage within
    /// [`ExecOptions::stage_timeout`] or NCCL reports an asynchronous error (the transport is
    /// aborted first, and the executor refuses further runs); CUDA and NCCL call failures;
    /// inputs never uploaded or bound.
    ///
    /// [`ExecOptions::stage_timeout`]: super::ExecOptions::stage_timeout
    pub fn run(&mut self) -> Result<RunTiming> {
        self.launch_after(None)?;
        self.wait()
    }

    /// Enqueues one run ordered after the work queued so far on the caller's `stream` (a
    /// `CUstream` of the main device's primary context, e.g. PyTorch's current stream), and
    /// makes `stream` wait for the run's end: the caller's later work sees the outputs, and
    /// memory the caller frees afterwards on that stream is not reused before the run is done
    /// with it. Returns without waiting for the device (no host synchronisation); a fault of
    /// the run surfaces at the next `launch` (when the device has reported it by then) or at
    /// [`CudaExecutor::wait`].
    ///
    /// # Errors
    /// As [`CudaExecutor::run`], for what is known when it returns: the previous launched
    /// run's device errors, inputs not bound, enqueue failures.
    pub fn launch(&mut self, stream: cudarc::driver::sys::CUstream) -> Result<()> {
        self.launch_after(Some(stream))
    }

    fn launch_after(&mut self, caller: Option<cudarc::driver::sys::CUstream>) -> Result<()> {
        if self.faulted {
            return Err(RuntimeError::Unsupported(
                "this executor stopped after a fault (its transport is aborted); build a new one"
                    .into(),
            ));
        }
        let t0 = std::time::Instant::now();
        self.check_pending()?;
        self.check_documents()?;
        if let Some(i) = self.globals.iter().position(|g| !g.ready) {
            let b = &self.plan.buffers[i];
            return Err(RuntimeError::Io(format!(
                "{} buffer #{i} ('{}') was never {}",
                if b.role == Role::Input {
                    "input"
                } else {
                    "output"
                },
                b.name,
                if b.role == Role::Input {
                    "uploaded or bound"
                } else {
                    "bound"
                }
            )));
        }
        let progress = fault::progress();
        progress.set_context(
            self.who.clone(),
            self.schedule.len(),
            self.stage_peers.clone(),
        );
        let _armed = progress.arm(
            Phase::Init,
            self.opts.stage_timeout + fault::WATCHDOG_GRACE,
            "enqueueing the slot initialisation",
        );
        self.runs += 1;
        self.cur_phase = 0;
        if let Err(e) = self.apply_direct() {
            return Err(self.failed(e));
        }
        let enqueued = self.enqueue(caller);
        self.last_enqueue = t0.elapsed();
        match enqueued {
            Ok(enq) => {
                self.pending = Some(enq);
                Ok(())
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// An error of a run: a fault as it is; any other error, where peers in other processes
    /// may wait on work this run never enqueued, aborts the communicators and says where.
    fn failed(&mut self, e: RuntimeError) -> RuntimeError {
        match e {
            e @ RuntimeError::Fault(_) => e,
            e if self.transport.can_abort() => {
                self.fault(self.cur_phase, &[], Cause::Failed(e.to_string()))
            }
            e => e,
        }
    }

    /// Without blocking: the device errors of the launched run not yet waited for, and, when
    /// the device has finished it, what [`CudaExecutor::wait`] does after it (its times, the
    /// release of replaced scratch).
    fn check_pending(&mut self) -> Result<()> {
        let Some(enq) = self.pending else {
            return Ok(());
        };
        let mut done = true;
        for m in &self.marks[..enq] {
            match m.try_is_complete() {
                Ok(true) => {}
                Ok(false) => {
                    // Still running: later marks' errors surface at a later check.
                    done = false;
                    break;
                }
                Err(e) => {
                    self.pending = None;
                    let e = RuntimeError::driver("device error while running the plan")(e);
                    return Err(self.failed(e));
                }
            }
        }
        if let Some(e) = self.transport.async_error() {
            self.pending = None;
            return Err(self.fault(self.cur_phase, &[], Cause::Nccl(e)));
        }
        if done
            && self.ev_time[3]
                .try_is_complete()
                .map_err(RuntimeError::driver("device error while running the plan"))?
        {
            self.wait()?;
        }
        Ok(())
    }

    /// Waits for the last launched run by polling its progress marks (a stall of
    /// [`ExecOptions::stage_timeout`] or a device or NCCL error: [`RuntimeError::Fault`] under
    /// NCCL, else the error), then returns its device times (those of the last run waited for
    /// when none is pending).
    ///
    /// [`ExecOptions::stage_timeout`]: super::ExecOptions::stage_timeout
    pub fn wait(&mut self) -> Result<RunTiming> {
        let Some(enq) = self.pending.take() else {
            return self.last_timing.ok_or_else(|| {
                RuntimeError::Io("no run of this executor has been launched".into())
            });
        };
        let _armed = fault::progress().arm(
            Phase::Outputs,
            self.opts.stage_timeout + fault::WATCHDOG_GRACE,
            "waiting for the device (polling progress events)",
        );
        match self.finish(enq) {
            Ok(t) => {
                self.last_timing = Some(t);
                Ok(t)
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// The end of [`CudaExecutor::wait`]: the marks, the last event, deferred errors, the
    /// scratch replaced by growth, the times.
    fn finish(&mut self, enq: usize) -> Result<RunTiming> {
        self.wait_marks(enq)?;
        self.wait_for(&self.ev_time[3], "the end of the run")?;
        for d in &self.devs {
            d.ctx
                .check_err()
                .map_err(RuntimeError::driver("deferred CUDA error"))?;
        }
        for s in self
            .ranks
            .iter_mut()
            .map(|r| &mut r.scratch)
            .chain(self.transfer_scratch.iter_mut())
        {
            s.release_old();
        }
        let el = |a: usize, b: usize| {
            self.ev_time[a]
                .elapsed_ms(&self.ev_time[b])
                .map_err(RuntimeError::driver("event elapsed"))
        };
        Ok(RunTiming {
            init_ms: el(0, 1)?,
            stages_ms: el(1, 2)?,
            outputs_ms: el(2, 3)?,
        })
    }

    /// Enqueues a run (armed, counted), after the work on the `caller`'s stream when given,
    /// which then waits for the run's end; keeps `cur_phase` current. Returns the number of
    /// progress marks enqueued.
    fn enqueue(&mut self, caller: Option<cudarc::driver::sys::CUstream>) -> Result<usize> {
        if let Some(ri) = self.lean {
            return self.enqueue_lean(ri, caller);
        }
        let stages = self.schedule.len();
        let progress = fault::progress();
        self.tracker.reset();
        // Marks enqueued so far.
        let mut enq = 0;
        self.bind_main()?;
        let rec =
            |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(RuntimeError::driver("record"));
        self.after_caller(caller, &self.hub)?;
        // Everything starts after the hub's work (uploads, fills, the caller's stream).
        self.poison_outputs(&self.hub)?;
        rec(&self.ev_time[0], &self.hub)?;
        self.ev_barrier
            .record(&self.hub)
            .map_err(RuntimeError::driver("record barrier"))?;
        self.wait_barrier()?;
        for ri in 0..self.ranks.len() {
            if self.ranks[ri].local {
                self.init_rank(ri)?;
            }
        }
        self.record_marks(0, &mut enq)?;
        self.barrier()?;
        rec(&self.ev_time[1], &self.hub)?;

        let peers = self.opts.sync == StageSync::Peers;
        for si in 0..stages {
            self.cur_phase = si + 1;
            progress.enter(Phase::Stage(si), "enqueueing the stage");
            if let Some(f) = self.due_fault(si) {
                self.inject(f, si, enq)?;
            }
            if peers {
                self.peer_wait(si)?;
            }
            self.enqueue_compute(si)?;
            let mut tcx = TransferCx {
                mem: &self.mem,
                streams: &self.transfer_streams,
                scratch: &mut self.transfer_scratch,
                rank_dev: &self.rank_dev,
                dks: &self.dks,
                max_pitch: &self.max_pitch,
                peers: self.peers.as_ref(),
            };
            let st = &self.schedule.stages[si];
            // SAFETY: views resolved and checked in `new`; the stage's waits are enqueued.
            unsafe { self.transport.stage(&mut tcx, st)? };
            self.record_marks(si + 1, &mut enq)?;
            self.bind_main()?;
            if peers {
                self.peer_record(si)?;
            } else {
                self.barrier()?;
            }
        }
        if peers {
            // Everything joins before the output gather (and the timing event).
            self.barrier()?;
        }
        rec(&self.ev_time[2], &self.hub)?;
        self.cur_phase = stages + 1;
        progress.enter(Phase::Outputs, "enqueueing the output gather");
        self.enqueue_outputs()?;
        self.record_marks(stages + 1, &mut enq)?;
        self.bind_main()?;
        self.barrier()?;
        rec(&self.ev_time[3], &self.hub)?;
        self.release_caller(caller)?;
        Ok(enq)
    }

    /// Enqueues every local rank's compute of stage `si` on its compute stream.
    fn enqueue_compute(&mut self, si: usize) -> Result<()> {
        for r in self.ranks.iter_mut() {
            let Some(ops_here) = r.stages.get(si) else {
                continue;
            };
            if ops_here.is_empty() {
                continue;
            }
            let d = &self.devs[r.dev];
            d.ctx
                .bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            let patches = Patches {
                dk: &self.dks[r.dev],
                gemm: d.gemm.as_ref(),
                attention: d.attention.as_deref(),
                attention_f32: d.attention_f32.as_deref(),
                cudnn: d.cudnn.as_deref(),
            };
            let mut cx = CopyCx {
                stream: &r.compute,
                scratch: &mut r.scratch,
                dk: &self.dks[r.dev],
                max_pitch: self.max_pitch[r.dev],
                peers: self.peers.as_ref(),
                here: self.devs[r.dev].id,
            };
            for op in ops_here {
                // SAFETY: resolved against this executor's memory in `new`.
                unsafe { ops::enqueue(&mut cx, &patches, r.ws.as_ref(), op)? };
            }
        }
        Ok(())
    }

    /// Enqueues every local rank's output gather on its compute stream (pieces a block wrote
    /// itself skipped).
    fn enqueue_outputs(&mut self) -> Result<()> {
        for r in self.ranks.iter_mut().filter(|r| r.local) {
            r.compute
                .context()
                .bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            let mut cx = CopyCx {
                stream: &r.compute,
                scratch: &mut r.scratch,
                dk: &self.dks[r.dev],
                max_pitch: self.max_pitch[r.dev],
                peers: self.peers.as_ref(),
                here: self.devs[r.dev].id,
            };
            for (i, (src, dst)) in r.outputs.iter().enumerate() {
                if r.skip_out.get(i).copied().unwrap_or(false) {
                    // Its block wrote the output itself (`direct.rs`).
                    continue;
                }
                cx.scratch.reset();
                // SAFETY: resolved against this executor's memory in `new`.
                unsafe { mem::copy(&mut cx, src, dst)? };
            }
        }
        Ok(())
    }

    /// [`CudaExecutor::enqueue`] for a plan that moves nothing between ranks and has one
    /// local rank on the main device (world size 1, a rank of a process group that never
    /// communicates): everything on that rank's compute stream, ordered after the hub's work
    /// (uploads) and the caller's stream, with no barrier; the hub and the caller's stream
    /// then wait for its end. A dozen driver calls around the compute instead of about forty.
    fn enqueue_lean(
        &mut self,
        ri: usize,
        caller: Option<cudarc::driver::sys::CUstream>,
    ) -> Result<usize> {
        let stages = self.schedule.len();
        let progress = fault::progress();
        self.tracker.reset();
        let mut enq = 0;
        self.bind_main()?;
        let cs = self.ranks[ri].compute.clone();
        let rec = |e: &CudaEvent| e.record(&cs).map_err(RuntimeError::driver("record"));
        self.ev_barrier
            .record(&self.hub)
            .map_err(RuntimeError::driver("record barrier"))?;
        cs.wait(&self.ev_barrier)
            .map_err(RuntimeError::driver("wait barrier"))?;
        self.after_caller(caller, &cs)?;
        self.poison_outputs(&cs)?;
        rec(&self.ev_time[0])?;
        self.init_rank(ri)?;
        self.record_marks(0, &mut enq)?;
        rec(&self.ev_time[1])?;
        for si in 0..stages {
            self.cur_phase = si + 1;
            progress.enter(Phase::Stage(si), "enqueueing the stage");
            if let Some(f) = self.due_fault(si) {
                self.inject(f, si, enq)?;
            }
            self.enqueue_compute(si)?;
            self.record_marks(si + 1, &mut enq)?;
        }
        rec(&self.ev_time[2])?;
        self.cur_phase = stages + 1;
        progress.enter(Phase::Outputs, "enqueueing the output gather");
        self.enqueue_outputs()?;
        self.record_marks(stages + 1, &mut enq)?;
        self.bind_main()?;
        rec(&self.ev_time[3])?;
        self.hub
            .wait(&self.ev_time[3])
            .map_err(RuntimeError::driver("wait for the run"))?;
        self.release_caller(caller)?;
        Ok(enq)
    }

    /// Orders `stream`'s next work after the work queued so far on the `caller`'s stream.
    fn after_caller(
        &self,
        caller: Option<cudarc::driver::sys::CUstream>,
        stream: &CudaStream,
    ) -> Result<()> {
        let Some(cs) = caller else {
            return Ok(());
        };
        // SAFETY: `ev_caller` is a live event of the main context (current); `cs` is a stream
        // of that context (the caller's contract).
        unsafe { cudarc::driver::sys::cuEventRecord(self.ev_caller.cu_event(), cs) }
            .result()
            .map_err(RuntimeError::driver(
                "record an event on the caller's stream",
            ))?;
        stream
            .wait(&self.ev_caller)
            .map_err(RuntimeError::driver("wait for the caller's stream"))
    }

    /// Makes the `caller`'s stream wait for the end of the run (`ev_time[3]`, recorded).
    fn release_caller(&self, caller: Option<cudarc::driver::sys::CUstream>) -> Result<()> {
        let Some(cs) = caller else {
            return Ok(());
        };
        // SAFETY: `cs` is a stream of the main context (the caller's contract); the event is
        // live.
        unsafe { cudarc::driver::sys::cuStreamWaitEvent(cs, self.ev_time[3].cu_event(), 0) }
            .result()
            .map_err(RuntimeError::driver(
                "make the caller's stream wait for the run",
            ))
    }

    /// Poisons, on `stream` (of the main device), the output pieces whose coverage by the
    /// plan's writes is not proven (own allocations, dense bound pieces).
    fn poison_outputs(&self, stream: &CudaStream) -> Result<()> {
        for g in self.globals.iter().filter(|g| g.role == Role::Output) {
            for (p, _) in g.pieces.iter().zip(&g.poison).filter(|(_, on)| **on) {
                let bytes = p.region.numel() * g.dtype.size_bytes();
                // SAFETY: own allocations hold the buffer; a poisoned bound piece is dense (one
                // run of memory from its first element) on the main device (`bind_global`).
                unsafe { mem::poison(stream, p.ptr, bytes, g.dtype)? };
            }
        }
        Ok(())
    }
}
