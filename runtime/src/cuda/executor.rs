//! `CudaExecutor`: runs a `mercury_plan::Plan` with N virtual ranks on one GPU.
//!
//! Each rank has its own slots (device allocations), a compute stream and a transfer stream.
//! A stage enqueues the rank's compute ops in order on its compute stream and the stage's
//! transfers through the [`Transport`] on the transfer streams (concurrently with compute).
//! Stages are ordered on the device only, never by the host (no synchronize, no host wait
//! per stage), in one of two ways ([`ExecOptions::sync`]):
//! * [`StageSync::Barrier`]: a barrier over all ranks after every stage, built from events:
//!   every rank stream records an event, a hub stream waits on all of them and records the
//!   barrier event, and every rank stream waits on that (4N + 1 calls a stage).
//! * [`StageSync::Peers`] (default): point-to-point event waits (`schedule::peer_waits`): a
//!   stream waits only for the streams that earlier touched the ranks whose memory it
//!   touches now, so a rank's next stage starts as soon as its own inputs are ready, while
//!   other ranks finish theirs.
//!
//! Slot initialisation and the output gather are fenced by full barriers in both modes. The
//! host waits only once, at the end, by polling with a timeout.
//!
//! Slot initialisation: `FromGlobal` copies its region of the uploaded global input,
//! `Zero` zeroes, `NegInf` sets every element to minus infinity (the lse half of an empty
//! softmax accumulator; its o half is a `Zero` slot), and `Uninit` is poisoned with NaN. Global outputs are poisoned before every run, so a region
//! no rank writes reads back as NaN.

use super::device_kernels::DeviceKernels;
use super::error::{Result, RuntimeError};
use super::mem::{self, CopyCx, Loc, MemTable, Scratch, SlotInfo};
use super::ops::{self, check_copy, ComputeLaunch, Patches};
use super::schedule::{self, Schedule, StageSync, StageWaits};
use super::transport::{TransferCx, Transport, VirtualTransport};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use mercury_kernels::cuda::{AttentionPatch, AttnVariant, GemmPatch, GemmWorkspace};
use mercury_plan::{ComputeOp, DType, PatchKind, Plan, Region, Role, SlotInit};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of a [`CudaExecutor`].
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// How long [`CudaExecutor::run`] waits for the device before giving up.
    pub timeout: Duration,
    /// Poison `Uninit` slots with NaN (on by default; off only to measure its cost).
    pub poison_uninit: bool,
    /// cuBLASLt workspace per rank (only allocated when the plan has GEMMs).
    pub gemm_workspace_bytes: usize,
    /// Attention kernel variant (both compute the same function; W4 measured faster).
    pub attention_variant: AttnVariant,
    /// How stages are ordered (both without host synchronisation).
    pub sync: StageSync,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            timeout: Duration::from_secs(300),
            poison_uninit: true,
            gemm_workspace_bytes: GemmWorkspace::DEFAULT_BYTES,
            attention_variant: AttnVariant::W4,
            // Measured 0.4 ms faster than the barrier on the P3 ring (29.08 vs 29.51 ms
            // causal, 56.57 vs 56.96 ms non-causal; docs/perf.md); every P0 plan
            // passed under both.
            sync: StageSync::Peers,
        }
    }
}

/// Host copy of a global buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// bf16 or f16 bit patterns.
    Bits16(Vec<u16>),
}

impl HostData {
    fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
            HostData::Bits16(v) => v.len(),
        }
    }

    /// Values as f64 (bf16/f16 decoded according to `dtype`).
    pub fn to_f64(&self, dtype: DType) -> Vec<f64> {
        match self {
            HostData::F32(v) => v.iter().map(|x| *x as f64).collect(),
            HostData::F64(v) => v.clone(),
            HostData::Bits16(v) => match dtype {
                DType::F16 => v
                    .iter()
                    .map(|x| half::f16::from_bits(*x).to_f64())
                    .collect(),
                _ => v
                    .iter()
                    .map(|x| half::bf16::from_bits(*x).to_f64())
                    .collect(),
            },
        }
    }

    /// `values` converted to the device representation of `dtype` (bf16/f16 round to nearest).
    pub fn from_f64(values: &[f64], dtype: DType) -> HostData {
        match dtype {
            DType::F64 => HostData::F64(values.to_vec()),
            DType::F32 => HostData::F32(values.iter().map(|x| *x as f32).collect()),
            DType::BF16 => HostData::Bits16(
                values
                    .iter()
                    .map(|x| half::bf16::from_f64(*x).to_bits())
                    .collect(),
            ),
            DType::F16 => HostData::Bits16(
                values
                    .iter()
                    .map(|x| half::f16::from_f64(*x).to_bits())
                    .collect(),
            ),
        }
    }
}

/// Device times of one [`CudaExecutor::run`] (CUDA events on the hub stream).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTiming {
    /// Slot initialisation (shard copies, fills, poisoning).
    pub init_ms: f32,
    /// All stages, from the barrier after initialisation to the barrier after the last stage.
    pub stages_ms: f32,
    /// Gathering output pieces into the global outputs.
    pub outputs_ms: f32,
}

enum InitLaunch {
    Copy { src: Loc, dst: Loc },
    Zero,
    NegInf(Loc),
    Poison,
    Nothing,
}

struct GlobalMem {
    _buf: CudaSlice<u8>,
    ptr: u64,
    dtype: DType,
    shape: Vec<usize>,
    role: Role,
    ready: bool,
}

impl GlobalMem {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    fn bytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }
}

struct RankState {
    compute: Arc<CudaStream>,
    ev_compute: CudaEvent,
    ev_transfer: CudaEvent,
    scratch: Scratch,
    ws: Option<GemmWorkspace>,
    _slots: Vec<CudaSlice<u8>>,
    init: Vec<InitLaunch>,
    stages: Vec<Vec<ComputeLaunch>>,
    outputs: Vec<(Loc, Loc)>,
}

/// Runs a plan with N virtual ranks on one GPU (see the module docs).
pub struct CudaExecutor {
    ctx: Arc<CudaContext>,
    plan: Plan,
    schedule: Schedule,
    mem: MemTable,
    dk: DeviceKernels,
    gemm: Option<GemmPatch>,
    attention: Option<AttentionPatch>,
    ranks: Vec<RankState>,
    transfer_streams: Vec<Arc<CudaStream>>,
    transfer_scratch: Vec<Scratch>,
    globals: Vec<GlobalMem>,
    hub: Arc<CudaStream>,
    ev_barrier: CudaEvent,
    ev_time: [CudaEvent; 4],
    transport: Box<dyn Transport>,
    /// Per stage: the waits and records of [`StageSync::Peers`].
    peer: Vec<StageWaits>,
    max_pitch: usize,
    opts: ExecOptions,
}

impl Drop for CudaExecutor {
    fn drop(&mut self) {
        // Queued work may still use slots and scratch; let it finish before they are freed.
        let _ = self.ctx.synchronize();
    }
}

fn new_event(ctx: &Arc<CudaContext>, timing: bool) -> Result<CudaEvent> {
    ctx.new_event(Some(if timing {
        CUevent_flags::CU_EVENT_DEFAULT
    } else {
        CUevent_flags::CU_EVENT_DISABLE_TIMING
    }))
    .map_err(RuntimeError::driver("create event"))
}

fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<(CudaSlice<u8>, u64)> {
    // SAFETY: contents are initialised (copied, filled or poisoned) before any use.
    let buf = unsafe { stream.alloc::<u8>(bytes.max(256)) }
        .map_err(RuntimeError::driver("cuMemAlloc (slot)"))?;
    let ptr = {
        let (p, _sync) = buf.device_ptr(stream);
        p
    };
    Ok((buf, ptr))
}

impl CudaExecutor {
    /// Verifies `plan`, loads the device kernels (`device_kernels_ptx`, the PTX of
    /// `mercury_lowering::device_kernels_ptx`), compiles the patches the plan uses, allocates
    /// every slot and global buffer, and resolves every operation (so unsupported views and
    /// types fail here, before anything runs).
    pub fn new(
        ctx: Arc<CudaContext>,
        plan: Plan,
        device_kernels_ptx: &str,
        opts: ExecOptions,
    ) -> Result<Self> {
        mercury_plan::verify(&plan)?;
        let schedule = schedule::build(&plan).map_err(RuntimeError::Schedule)?;
        ctx.bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
        let dk = DeviceKernels::load(&ctx, device_kernels_ptx)?;
        let uses = |f: &dyn Fn(&PatchKind) -> bool| {
            plan.ranks.iter().any(|r| {
                r.stages.iter().any(|s| {
                    s.compute
                        .iter()
                        .any(|op| matches!(op, ComputeOp::Patch { patch, .. } if f(patch)))
                })
            })
        };
        let gemm = if uses(&|p| matches!(p, PatchKind::Gemm { .. })) {
            Some(GemmPatch::new(&ctx, opts.gemm_workspace_bytes)?)
        } else {
            None
        };
        let attention = if uses(&|p| matches!(p, PatchKind::Attention { .. })) {
            let mut a = AttentionPatch::new(&ctx)?;
            a.set_variant(opts.attention_variant);
            Some(a)
        } else {
            None
        };
        let new_stream = || {
            ctx.new_stream()
                .map_err(RuntimeError::driver("create stream"))
        };
        let hub = new_stream()?;
        let max_pitch = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_PITCH)
            .map_err(RuntimeError::driver("max pitch"))?
            .max(0) as usize;

        // Global buffers.
        let mut globals = Vec::with_capacity(plan.buffers.len());
        for b in &plan.buffers {
            let bytes = b.shape.iter().product::<usize>() * b.dtype.size_bytes();
            let (buf, ptr) = alloc(&hub, bytes)?;
            globals.push(GlobalMem {
                _buf: buf,
                ptr,
                dtype: b.dtype,
                shape: b.shape.clone(),
                role: b.role,
                ready: false,
            });
        }

        // Slots, streams and events of every rank.
        let mut mem = MemTable::default();
        let mut ranks = Vec::with_capacity(plan.ranks.len());
        let mut transfer_streams = Vec::with_capacity(plan.ranks.len());
        let mut transfer_scratch = Vec::with_capacity(plan.ranks.len());
        for r in &plan.ranks {
            let compute = new_stream()?;
            let transfer = new_stream()?;
            let mut slots = Vec::with_capacity(r.slots.len());
            let mut infos = Vec::with_capacity(r.slots.len());
            for s in &r.slots {
                let (buf, ptr) = alloc(&hub, s.bytes())?;
                slots.push(buf);
                infos.push(SlotInfo {
                    ptr,
                    dtype: s.dtype,
                    shape: s.shape.clone(),
                });
            }
            mem.ranks.push(infos);
            let ws = match &gemm {
                Some(_) => Some(GemmWorkspace::new(&compute, opts.gemm_workspace_bytes)?),
                None => None,
            };
            ranks.push(RankState {
                scratch: Scratch::new(compute.clone()),
                compute,
                ev_compute: new_event(&ctx, false)?,
                ev_transfer: new_event(&ctx, false)?,
                ws,
                _slots: slots,
                init: Vec::new(),
                stages: Vec::new(),
                outputs: Vec::new(),
            });
            transfer_scratch.push(Scratch::new(transfer.clone()));
            transfer_streams.push(transfer);
        }
        hub.synchronize()
            .map_err(RuntimeError::driver("synchronize allocations"))?;

        let transport: Box<dyn Transport> = Box::new(VirtualTransport);
        // Resolve every operation against the real addresses.
        for (ri, r) in plan.ranks.iter().enumerate() {
            let mut init = Vec::with_capacity(r.slots.len());
            for (si, s) in r.slots.iter().enumerate() {
                let info = &mem.ranks[ri][si];
                let full = Region::full(&s.shape);
                init.push(match &s.init {
                    SlotInit::Uninit if opts.poison_uninit => InitLaunch::Poison,
                    SlotInit::Uninit => InitLaunch::Nothing,
                    SlotInit::Zero => InitLaunch::Zero,
                    SlotInit::NegInf => {
                        mem::neg_inf_pattern(s.dtype)?;
                        InitLaunch::NegInf(Loc::of(info.ptr, s.dtype, &s.shape, &full)?)
                    }
                    SlotInit::FromGlobal { buffer, region } => {
                        let g = globals.get(*buffer).ok_or_else(|| {
                            RuntimeError::Io(format!("slot '{}' reads buffer #{buffer}", s.name))
                        })?;
                        if g.role != Role::Input {
                            return Err(RuntimeError::Io(format!(
                                "slot '{}' of rank {ri} is initialised from output buffer #{buffer}",
                                s.name
                            )));
                        }
                        let src = Loc::of(g.ptr, g.dtype, &g.shape, region)?;
                        let dst = Loc::of(info.ptr, s.dtype, &s.shape, &full)?;
                        check_copy(&src, &dst)?;
                        InitLaunch::Copy { src, dst }
                    }
                });
            }
            let mut stages = Vec::with_capacity(r.stages.len());
            for st in &r.stages {
                let mut ops_here = Vec::with_capacity(st.compute.len());
                for op in &st.compute {
                    ops_here.push(ops::resolve(&mem, ri, op)?);
                }
                stages.push(ops_here);
            }
            let mut outputs = Vec::with_capacity(r.outputs.len());
            for o in &r.outputs {
                let g = globals.get(o.buffer).ok_or_else(|| {
                    RuntimeError::Io(format!("output piece names buffer #{}", o.buffer))
                })?;
                if g.role != Role::Output {
                    return Err(RuntimeError::Io(format!(
                        "rank {ri} writes an output piece into input buffer #{}",
                        o.buffer
                    )));
                }
                let src = mem.loc(ri, &o.src)?;
                let dst = Loc::of(g.ptr, g.dtype, &g.shape, &o.region)?;
                check_copy(&src, &dst)?;
                outputs.push((src, dst));
            }
            ranks[ri].init = init;
            ranks[ri].stages = stages;
            ranks[ri].outputs = outputs;
        }
        for st in &schedule.stages {
            for m in &st.messages {
                check_copy(&mem.loc(m.src_rank, &m.src)?, &mem.loc(m.dst_rank, &m.dst)?)?;
            }
            for c in &st.collectives {
                transport.check_collective(&mem, c)?;
            }
        }
        let nranks = plan.ranks.len();
        let touches = schedule::stage_touches(
            &schedule,
            nranks,
            |si, r| ranks[r].stages.get(si).is_some_and(|o| !o.is_empty()),
            |m| transport.message_rank(m),
            |c| transport.collective_rank(c),
        );
        let peer = schedule::peer_waits(&touches, nranks);
        let ev_time = [
            new_event(&ctx, true)?,
            new_event(&ctx, true)?,
            new_event(&ctx, true)?,
            new_event(&ctx, true)?,
        ];
        Ok(CudaExecutor {
            ev_barrier: new_event(&ctx, false)?,
            ev_time,
            ctx,
            plan,
            schedule,
            mem,
            dk,
            gemm,
            attention,
            ranks,
            transfer_streams,
            transfer_scratch,
            globals,
            hub,
            transport,
            peer,
            max_pitch,
            opts,
        })
    }

    /// Changes how later runs order their stages (see [`StageSync`]).
    pub fn set_sync(&mut self, sync: StageSync) {
        self.opts.sync = sync;
    }

    /// The plan being executed.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Slot addresses of every rank.
    pub fn memory(&self) -> &MemTable {
        &self.mem
    }

    /// The matched transfers of every stage.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Name of the transport in use.
    pub fn transport_name(&self) -> &'static str {
        self.transport.name()
    }

    /// The stream on which global buffers are filled; work enqueued on it before
    /// [`CudaExecutor::run`] completes before the run reads the inputs.
    pub fn upload_stream(&self) -> &Arc<CudaStream> {
        &self.hub
    }

    fn global(&self, buffer: usize) -> Result<&GlobalMem> {
        self.globals
            .get(buffer)
            .ok_or_else(|| RuntimeError::Io(format!("no global buffer #{buffer}")))
    }

    /// Device address of global buffer `buffer` (dense, row-major, its dtype).
    pub fn global_ptr(&self, buffer: usize) -> Result<u64> {
        Ok(self.global(buffer)?.ptr)
    }

    /// Declares input `buffer` written by the caller directly on the device (e.g. a random
    /// fill enqueued on [`CudaExecutor::upload_stream`]).
    pub fn mark_input_written(&mut self, buffer: usize) -> Result<()> {
        let g = self
            .globals
            .get_mut(buffer)
            .ok_or_else(|| RuntimeError::Io(format!("no global buffer #{buffer}")))?;
        if g.role != Role::Input {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is not an input"
            )));
        }
        g.ready = true;
        Ok(())
    }

    /// Uploads global input `buffer` (host data in the buffer's device representation).
    pub fn upload_input(&mut self, buffer: usize, data: &HostData) -> Result<()> {
        let g = self.global(buffer)?;
        if g.role != Role::Input {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is not an input"
            )));
        }
        let ok = matches!(
            (data, g.dtype),
            (HostData::F32(_), DType::F32)
                | (HostData::F64(_), DType::F64)
                | (HostData::Bits16(_), DType::BF16 | DType::F16)
        );
        if !ok || data.len() != g.numel() {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is {} x {:?}; got {} host values of another type or count",
                g.dtype.name(),
                g.shape,
                data.len()
            )));
        }
        let ptr = g.ptr;
        self.hub
            .synchronize()
            .map_err(RuntimeError::driver("synchronize before upload"))?;
        // SAFETY: `ptr` is the buffer's allocation, sized for exactly `data.len()` elements of
        // the host type (checked above); the copy is synchronous.
        let r = unsafe {
            match data {
                HostData::F32(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
                HostData::F64(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
                HostData::Bits16(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
            }
        };
        r.map_err(RuntimeError::driver("upload input"))?;
        self.globals[buffer].ready = true;
        Ok(())
    }

    /// Uploads global input `buffer` from f64 values (converted to the buffer's dtype).
    pub fn upload_input_f64(&mut self, buffer: usize, values: &[f64]) -> Result<()> {
        let dtype = self.global(buffer)?.dtype;
        self.upload_input(buffer, &HostData::from_f64(values, dtype))
    }

    /// Downloads global buffer `buffer` (after [`CudaExecutor::run`]).
    pub fn download(&self, buffer: usize) -> Result<HostData> {
        let g = self.global(buffer)?;
        self.ctx
            .synchronize()
            .map_err(RuntimeError::driver("synchronize before download"))?;
        let n = g.numel();
        // SAFETY: the allocation holds `n` elements of the buffer's dtype.
        let r = unsafe {
            match g.dtype {
                DType::F32 => {
                    let mut v = vec![0f32; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, g.ptr)
                        .map(|_| HostData::F32(v))
                }
                DType::F64 => {
                    let mut v = vec![0f64; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, g.ptr)
                        .map(|_| HostData::F64(v))
                }
                DType::BF16 | DType::F16 => {
                    let mut v = vec![0u16; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, g.ptr)
                        .map(|_| HostData::Bits16(v))
                }
            }
        };
        r.map_err(RuntimeError::driver("download"))
    }

    /// Downloads global buffer `buffer` as f64.
    pub fn download_f64(&self, buffer: usize) -> Result<Vec<f64>> {
        let dtype = self.global(buffer)?.dtype;
        Ok(self.download(buffer)?.to_f64(dtype))
    }

    /// Every rank stream records, the hub waits on all and records the barrier, every rank
    /// stream waits on the barrier.
    fn barrier(&self) -> Result<()> {
        for (r, t) in self.ranks.iter().zip(&self.transfer_streams) {
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
    fn stream_and_event(&self, id: usize) -> (&CudaStream, &CudaEvent) {
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
    fn peer_wait(&self, si: usize) -> Result<()> {
        for &(y, x) in &self.peer[si].waits {
            let (sy, _) = self.stream_and_event(y);
            let (_, ex) = self.stream_and_event(x);
            sy.wait(ex).map_err(RuntimeError::driver("wait peer"))?;
        }
        Ok(())
    }

    /// After stage `si` under [`StageSync::Peers`]: the streams with work record their event.
    fn peer_record(&self, si: usize) -> Result<()> {
        for &y in &self.peer[si].record {
            let (sy, ey) = self.stream_and_event(y);
            ey.record(sy).map_err(RuntimeError::driver("record peer"))?;
        }
        Ok(())
    }

    fn wait_barrier(&self) -> Result<()> {
        for (r, t) in self.ranks.iter().zip(&self.transfer_streams) {
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
        let mut cx = CopyCx {
            stream: &r.compute,
            scratch: &mut r.scratch,
            dk: &self.dk,
            max_pitch: self.max_pitch,
        };
        for (si, init) in r.init.iter().enumerate() {
            let info = &self.mem.ranks[ri][si];
            let bytes = info.shape.iter().product::<usize>() * info.dtype.size_bytes();
            cx.scratch.reset();
            // SAFETY: the slot allocation holds `bytes`; locations were resolved
            // against it and the global buffers.
            unsafe {
                match init {
                    InitLaunch::Copy { src, dst } => mem::copy(&mut cx, src, dst)?,
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
    /// waits (with the configured timeout) for the device.
    pub fn run(&mut self) -> Result<RunTiming> {
        if let Some(i) = self
            .globals
            .iter()
            .position(|g| g.role == Role::Input && !g.ready)
        {
            return Err(RuntimeError::Io(format!(
                "input buffer #{i} ('{}') was never uploaded",
                self.plan.buffers[i].name
            )));
        }
        self.ctx
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
        let rec =
            |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(RuntimeError::driver("record"));
        // Poison the outputs; everything starts after the hub's work (uploads, fills).
        for g in self.globals.iter().filter(|g| g.role == Role::Output) {
            // SAFETY: the allocation holds `bytes()` bytes.
            unsafe { mem::poison(&self.hub, g.ptr, g.bytes(), g.dtype)? };
        }
        rec(&self.ev_time[0], &self.hub)?;
        self.ev_barrier
            .record(&self.hub)
            .map_err(RuntimeError::driver("record barrier"))?;
        self.wait_barrier()?;
        for ri in 0..self.ranks.len() {
            self.init_rank(ri)?;
        }
        self.barrier()?;
        rec(&self.ev_time[1], &self.hub)?;

        let patches = Patches {
            dk: &self.dk,
            gemm: self.gemm.as_ref(),
            attention: self.attention.as_ref(),
        };
        let peers = self.opts.sync == StageSync::Peers;
        for si in 0..self.schedule.len() {
            if peers {
                self.peer_wait(si)?;
            }
            for r in self.ranks.iter_mut() {
                let Some(ops_here) = r.stages.get(si) else {
                    continue;
                };
                let mut cx = CopyCx {
                    stream: &r.compute,
                    scratch: &mut r.scratch,
                    dk: &self.dk,
                    max_pitch: self.max_pitch,
                };
                for op in ops_here {
                    // SAFETY: resolved against this executor's memory in `new`.
                    unsafe { ops::enqueue(&mut cx, &patches, r.ws.as_ref(), op)? };
                }
            }
            let mut tcx = TransferCx {
                mem: &self.mem,
                dk: &self.dk,
                streams: &self.transfer_streams,
                scratch: &mut self.transfer_scratch,
                max_pitch: self.max_pitch,
            };
            let st = &self.schedule.stages[si];
            for m in &st.messages {
                // SAFETY: views resolved and checked in `new`; the barrier is enqueued.
                unsafe { self.transport.message(&mut tcx, m)? };
            }
            for c in &st.collectives {
                // SAFETY: as above.
                unsafe { self.transport.collective(&mut tcx, c)? };
            }
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
        for r in self.ranks.iter_mut() {
            let mut cx = CopyCx {
                stream: &r.compute,
                scratch: &mut r.scratch,
                dk: &self.dk,
                max_pitch: self.max_pitch,
            };
            for (src, dst) in &r.outputs {
                cx.scratch.reset();
                // SAFETY: resolved against this executor's memory in `new`.
                unsafe { mem::copy(&mut cx, src, dst)? };
            }
        }
        self.barrier()?;
        rec(&self.ev_time[3], &self.hub)?;
        self.wait_for(&self.ev_time[3], "the end of the run")?;
        self.ctx
            .check_err()
            .map_err(RuntimeError::driver("deferred CUDA error"))?;
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

    /// Polls `ev` until it completes, an error surfaces, or the timeout passes.
    fn wait_for(&self, ev: &CudaEvent, what: &str) -> Result<()> {
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
