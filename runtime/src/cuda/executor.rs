//! `CudaExecutor`: runs a `mercury_plan::Plan` with N ranks, as virtual ranks on one GPU
//! ([`CudaExecutor::new`]) or placed on several GPUs ([`CudaExecutor::new_placed`]: a
//! [`DeviceMap`] rank -> device, peer copies or NCCL between devices, see docs/multi-gpu.md).
//!
//! Each rank has its own slots (device allocations), a compute stream and a transfer stream,
//! all on its device's context. The global buffers and the hub stream live on the main device
//! (the first rank's).
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
//! host waits only once, at the end, by polling events (never a blocking synchronize): every
//! stream with work in a stage records a *mark* after it, and a run that sees no mark complete
//! for [`ExecOptions::stage_timeout`] ends with [`RuntimeError::Fault`] naming the stage, the
//! ranks that did not finish it and their peers, after aborting the transport (NCCL:
//! `ncclCommAbort`); NCCL's asynchronous errors are polled on the way (`cuda::fault`).
//!
//! Slot initialisation: `FromGlobal` copies its region of the uploaded global input
//! (`FromGlobalPieces` several regions, side by side: a zigzag or striped shard),
//! `Zero` zeroes, `NegInf` sets every element to minus infinity (the lse half of an empty
//! softmax accumulator; its o half is a `Zero` slot), and `Uninit` is poisoned with NaN. Global outputs are poisoned before every run, so a region
//! no rank writes reads back as NaN.

use super::device_kernels::DeviceKernels;
use super::error::{check, Result, RuntimeError};
use super::fault::{self, Cause, FaultKind, FaultReport, FaultSpec, MarkTracker, Phase, Who};
use super::launcher::World;
use super::mem::{self, CopyCx, Loc, MemTable, Peers, Scratch, SlotInfo};
use super::nccl::NcclTransport;
use super::ops::{self, check_copy, AttnVia, ComputeLaunch, Patches};
use super::placement::{distinct_groups, DeviceMap, PeerMatrix};
use super::schedule::{self, Schedule, StageSync, StageWaits};
use super::transport::{CopyTransport, TransferCx, Transport, Work};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use mercury_kernels::cuda::{
    AttentionPatch, AttnVariant, CudnnAttention, GemmPatch, GemmWorkspace, Tensor4,
};
use mercury_plan::{ComputeOp, DType, PatchKind, Plan, Region, Role, SlotInit};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of a [`CudaExecutor`].
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// How long [`CudaExecutor::run`] waits for the last event of a run once every stage has
    /// finished (a bound on the final output barrier).
    pub timeout: Duration,
    /// Progress deadline: a run in which no stream finishes its work of a stage for this long
    /// ends with [`RuntimeError::Fault`] (default 60 s; the process watchdog allows
    /// `fault::WATCHDOG_GRACE` more for a host blocked in a call).
    pub stage_timeout: Duration,
    /// A fault to inject into the first run (tests of the fault handling; see `cuda::fault`).
    pub fault: Option<FaultSpec>,
    /// Poison `Uninit` slots with NaN (on by default; off only to measure its cost).
    pub poison_uninit: bool,
    /// cuBLASLt workspace per rank (only allocated when the plan has GEMMs).
    pub gemm_workspace_bytes: usize,
    /// Which attention patch runs the plan's attention blocks.
    pub attention: AttnBackend,
    /// Merge the cuDNN parts of consecutive blocks into one accumulator in one pass
    /// (`ops::defer_groups`); off: one merge per block.
    pub defer_merges: bool,
    /// NVRTC attention kernel variant (both compute the same function; W4 measured faster).
    pub attention_variant: AttnVariant,
    /// How stages are ordered (both without host synchronisation).
    pub sync: StageSync,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            timeout: Duration::from_secs(300),
            stage_timeout: fault::DEFAULT_STAGE_TIMEOUT,
            fault: None,
            poison_uninit: true,
            gemm_workspace_bytes: GemmWorkspace::DEFAULT_BYTES,
            attention: AttnBackend::Cudnn,
            defer_merges: true,
            attention_variant: AttnVariant::W4,
            // Measured 0.4 ms faster than the barrier on the P3 ring (29.08 vs 29.51 ms
            // causal, 56.57 vs 56.96 ms non-causal; docs/perf.md); every P0 plan
            // passed under both.
            sync: StageSync::Peers,
        }
    }
}

/// The attention patch an executor uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnBackend {
    /// cuDNN fused attention (`mercury_kernels::cuda::cudnn`), with the NVRTC kernel for any
    /// block cuDNN cannot take (one warning naming the shape and the reason). Without a usable
    /// cuDNN, every block runs on the NVRTC kernel (one warning saying where cuDNN was looked
    /// for).
    Cudnn,
    /// The NVRTC FlashAttention-2-style kernel only (head dim 128).
    Nvrtc,
}

impl AttnBackend {
    /// `cudnn` or `nvrtc`.
    pub fn parse(s: &str) -> Option<AttnBackend> {
        match s {
            "cudnn" => Some(AttnBackend::Cudnn),
            "nvrtc" => Some(AttnBackend::Nvrtc),
            _ => None,
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
    Copy {
        src: Loc,
        dst: Loc,
    },
    /// A slot filled from several regions of a global input (zigzag and striped shards).
    Copies(Vec<(Loc, Loc)>),
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
    /// Driven by this process (false: another process's rank, whose streams are idle
    /// placeholders on the main device).
    local: bool,
    /// Index of the rank's device in `CudaExecutor::devs`.
    dev: usize,
    compute: Arc<CudaStream>,
    ev_compute: CudaEvent,
    ev_transfer: CudaEvent,
    scratch: Scratch,
    ws: Option<GemmWorkspace>,
    _slots: Vec<CudaSlice<u8>>,
    /// Part buffers of the attention blocks whose merges are deferred (one per group).
    _parts: Vec<CudaSlice<u8>>,
    init: Vec<InitLaunch>,
    stages: Vec<Vec<ComputeLaunch>>,
    outputs: Vec<(Loc, Loc)>,
}

/// Per device: its context, the patches compiled for it and an allocation stream.
struct DeviceRes {
    /// Device id (what locations carry; the CUDA ordinal unless ids alias GPUs).
    id: usize,
    ctx: Arc<CudaContext>,
    gemm: Option<GemmPatch>,
    attention: Option<Arc<AttentionPatch>>,
    cudnn: Option<Arc<CudnnAttention>>,
    stream: Arc<CudaStream>,
}

/// The cuDNN patch of `ctx` (handle and plan cache), made once per process and context: plans
/// take tens of milliseconds to a second to build, and every executor of the process shares
/// them. A failure (no usable cuDNN) is remembered too.
fn cudnn_patch(ctx: &Arc<CudaContext>) -> std::result::Result<Arc<CudnnAttention>, String> {
    type Cache = Vec<(usize, std::result::Result<Arc<CudnnAttention>, String>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| "cuDNN patch cache poisoned".to_string())?;
    if let Some((_, p)) = cache.iter().find(|(k, _)| *k == key) {
        return p.clone();
    }
    let p = CudnnAttention::new(ctx)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    cache.push((key, p.clone()));
    p
}

/// The attention patch of `ctx` in variant `v`, compiled once per process: NVRTC compilation
/// and module load of the attention kernels take seconds, and every executor would repeat
/// them (mercury-run builds two, the multi-device checks dozens). The cache keeps the module,
/// hence the context, alive for the life of the process.
fn attention_patch(ctx: &Arc<CudaContext>, v: AttnVariant) -> Result<Arc<AttentionPatch>> {
    type Cache = Vec<(usize, AttnVariant, Arc<AttentionPatch>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| RuntimeError::Unsupported("attention patch cache poisoned".into()))?;
    if let Some((_, _, p)) = cache.iter().find(|(k, w, _)| *k == key && *w == v) {
        return Ok(p.clone());
    }
    let mut a = AttentionPatch::new(ctx)?;
    a.set_variant(v);
    let a = Arc::new(a);
    cache.push((key, v, a.clone()));
    Ok(a)
}

/// Why [`CudaExecutor::poll_marks`] stopped early.
enum WaitErr {
    /// A CUDA error (the device faulted).
    Cuda(RuntimeError),
    /// An NCCL asynchronous error, described.
    Nccl(String),
}

/// How transfers move in a placed executor (see [`CudaExecutor::new_placed`]).
pub enum TransportChoice {
    /// Device copies and combine kernels; copies between GPUs are copy-engine peer copies.
    Copy,
    /// NCCL with communicators made in this process (one process drives every GPU); groups
    /// whose members share a GPU use copies.
    Nccl,
    /// NCCL with a launcher's world (one process per GPU or node): this process drives only
    /// the world's local ranks.
    NcclWorld(World),
}

impl std::fmt::Debug for TransportChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportChoice::Copy => write!(f, "Copy"),
            TransportChoice::Nccl => write!(f, "Nccl"),
            TransportChoice::NcclWorld(w) => write!(f, "NcclWorld({w:?})"),
        }
    }
}

/// Where the ranks of a placed executor run and how they talk.
#[derive(Debug)]
pub struct Placement {
    /// Rank -> device id (entries of other processes' ranks are not used). Device ids are CUDA
    /// ordinals unless `physical` says otherwise.
    pub devices: DeviceMap,
    pub transport: TransportChoice,
    /// Device id -> CUDA ordinal (`None`: the identity). Several ids may name one GPU: each id
    /// then gets its own resources and the copies between ids take the peer-copy paths
    /// (`cuMemcpyPeerAsync` within one context), which is how those paths are tested on a
    /// single GPU.
    pub physical: Option<Vec<usize>>,
}

impl Placement {
    /// `devices` with `transport`, device ids = CUDA ordinals.
    pub fn new(devices: DeviceMap, transport: TransportChoice) -> Placement {
        Placement {
            devices,
            transport,
            physical: None,
        }
    }

    /// Every rank on device `ordinal` with the copy transport: the virtual mode through the
    /// placed constructor.
    pub fn single_device(ranks: usize, ordinal: usize) -> Placement {
        Placement::new(DeviceMap::single(ranks, ordinal), TransportChoice::Copy)
    }

    /// The CUDA ordinal of device id `id`.
    pub fn ordinal_of(&self, id: usize) -> usize {
        self.physical
            .as_ref()
            .and_then(|p| p.get(id).copied())
            .unwrap_or(id)
    }
}

/// Runs a plan with N ranks on one GPU (virtual ranks) or on several (see the module docs).
pub struct CudaExecutor {
    /// Devices of this executor; index 0 is the main device (hub stream, global buffers).
    devs: Vec<DeviceRes>,
    /// Device kernels of each device (same index).
    dks: Vec<DeviceKernels>,
    max_pitch: Vec<usize>,
    /// Rank -> device index.
    rank_dev: Vec<usize>,
    /// Contexts by ordinal for peer copies (placed executors).
    peers: Option<Peers>,
    plan: Plan,
    schedule: Schedule,
    mem: MemTable,
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
    /// Progress marks of a run (see the module docs): the events, in enqueue order, and
    /// their bookkeeping (phase index 0 = initialisation, 1..=stages, stages + 1 = outputs).
    marks: Vec<CudaEvent>,
    tracker: MarkTracker,
    /// This process's ranks and GPUs, and per stage the peers of its ranks (fault reports).
    who: Arc<Who>,
    stage_peers: Arc<Vec<Vec<String>>>,
    /// Per rank, how reports name it: `rank 1 (GPU 1)` or `rank 1 (process 1)`.
    labels: Vec<String>,
    /// A device word that stays 0: an injected hang waits for it to become 1.
    hang_word: Option<(CudaSlice<u8>, u64)>,
    /// The injected fault fired already (it fires once).
    injected: bool,
    /// Runs started (the current run's number, from 1).
    runs: usize,
    /// Mark phase index the current run is enqueueing (0 = initialisation, 1..=stages,
    /// stages + 1 = outputs), for reports of failures.
    cur_phase: usize,
    /// A run ended with a fault: queued work may never finish, so nothing synchronizes.
    faulted: bool,
    warnings: Vec<String>,
    opts: ExecOptions,
}

impl Drop for CudaExecutor {
    fn drop(&mut self) {
        if self.faulted {
            // Work stuck on a dead peer or an injected hang never finishes; waiting would hang
            // (the process is expected to exit; the driver then reclaims everything).
            return;
        }
        // Queued work may still use slots and scratch; let it finish before they are freed.
        for d in &self.devs {
            let _ = d.ctx.synchronize();
        }
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

/// Largest part buffer one deferred merge group may take.
const MAX_PART_BYTES: usize = 4 << 30;

/// Points the blocks `members` (stage, op) of one deferral group at a part buffer allocated on
/// `stream`'s device, checking that cuDNN takes every block with its new output; returns the
/// buffer, or `None` (blocks left merging one by one) when the parts would be too large or a
/// plan is refused.
fn defer_group(
    cudnn: &CudnnAttention,
    stream: &Arc<CudaStream>,
    stages: &mut [Vec<ComputeLaunch>],
    members: &[(usize, usize)],
) -> Result<Option<CudaSlice<u8>>> {
    let split_of = |stages: &[Vec<ComputeLaunch>], (si, oi): (usize, usize)| match &stages[si][oi] {
        ComputeLaunch::Attention {
            launch,
            via: AttnVia::Cudnn(split),
        } => Some((launch.accumulate, (**split).clone())),
        _ => None,
    };
    let Some((first_acc, first)) = split_of(stages, members[0]) else {
        return Ok(None);
    };
    let n = members.len();
    let a = first.acc;
    let round = |x: usize, to: usize| x.div_ceil(to) * to;
    let o_stride = round(a.b * a.hq * a.sq * a.d, 128);
    let l_stride = round(a.b * a.hq * a.sq, 64);
    let bytes = n * (o_stride * 2 + l_stride * 4);
    if bytes > MAX_PART_BYTES {
        return Ok(None);
    }
    let (buf, base) = alloc(stream, bytes)?;
    // The compute streams use the buffer: finish the stream-ordered allocation first.
    stream
        .synchronize()
        .map_err(RuntimeError::driver("synchronize part allocation"))?;
    let (o_base, l_base) = (base, base + (n * o_stride * 2) as u64);
    let mut updated = Vec::with_capacity(n);
    for (j, &m) in members.iter().enumerate() {
        let Some((_, mut split)) = split_of(stages, m) else {
            return Ok(None);
        };
        if split.acc != a {
            return Ok(None);
        }
        let ps = ops::PartSlot {
            index: j,
            merge: (j + 1 == n).then_some((n, !first_acc)),
            o_base,
            l_base,
            o_stride,
            l_stride,
        };
        let (po, pl) = ps.addrs();
        if let Some(call) = &mut split.call {
            let (hq, sq, d, skip) = (a.hq as i64, a.sq as i64, a.d as i64, split.masked as u64);
            call.o = Tensor4 {
                ptr: po + skip * a.d as u64 * 2,
                strides: [hq * sq * d, sq * d, d, 1],
            };
            call.stats = Tensor4 {
                ptr: pl + skip * 4,
                strides: [hq * sq, sq, 1, 1],
            };
            if cudnn.support(call).is_err() {
                return Ok(None);
            }
        }
        split.part = Some(ps);
        updated.push((m, split));
    }
    for ((si, oi), split) in updated {
        if let ComputeLaunch::Attention { via, .. } = &mut stages[si][oi] {
            *via = AttnVia::Cudnn(Box::new(split));
        }
    }
    Ok(Some(buf))
}

/// Enables peer access between every pair of `ctxs` that `cuDeviceCanAccessPeer` allows, both
/// ways (contexts, and the default memory pools the slots come from); returns the matrix and a
/// warning per pair left to host-staged copies. `cuda::links` measures through it, so that its
/// figures are what the executor's transfers reach.
///
/// # Errors
/// CUDA failures of the queries or of enabling.
pub fn enable_peer_access(all: &[Arc<CudaContext>]) -> Result<(PeerMatrix, Vec<String>)> {
    use cudarc::driver::sys;
    // One context per GPU (device ids may alias a GPU).
    let mut ctxs: Vec<Arc<CudaContext>> = Vec::new();
    for c in all {
        if !ctxs.iter().any(|x| x.ordinal() == c.ordinal()) {
            ctxs.push(c.clone());
        }
    }
    let ctxs = &ctxs[..];
    let ordinals: Vec<usize> = ctxs.iter().map(|c| c.ordinal()).collect();
    let dev_of = |o: usize| {
        ctxs.iter()
            .find(|c| c.ordinal() == o)
            .map(|c| c.cu_device())
    };
    let mut failed: Option<RuntimeError> = None;
    let matrix = PeerMatrix::build(&ordinals, |a, b| {
        let (Some(da), Some(db)) = (dev_of(a), dev_of(b)) else {
            return false;
        };
        let mut can = 0i32;
        // SAFETY: `can` is a valid out-pointer; both handles are devices of live contexts.
        let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, da, db) };
        if let Err(e) = r.result() {
            failed.get_or_insert(RuntimeError::driver("cuDeviceCanAccessPeer")(e));
            return false;
        }
        can != 0
    });
    if let Some(e) = failed {
        return Err(e);
    }
    for a in ctxs {
        for b in ctxs {
            if a.ordinal() == b.ordinal() || !matrix.can_access(a.ordinal(), b.ordinal()) {
                continue;
            }
            a.bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            // SAFETY: `a` is current; `b`'s context is live. Grants `a` access to `b`'s
            // cuMemAlloc memory; enabling twice answers PEER_ACCESS_ALREADY_ENABLED.
            let r = unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) };
            if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                check(r, "cuCtxEnablePeerAccess")?;
            }
            // Slots and scratch come from the stream-ordered allocator (the device's default
            // pool), which peer access to the context does not cover.
            let pools = b
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
                .map_err(RuntimeError::driver("memory pools supported"))?;
            if pools > 0 {
                let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
                // SAFETY: `pool` is a valid out-pointer.
                check(
                    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, b.cu_device()) },
                    "cuDeviceGetDefaultMemPool",
                )?;
                // SAFETY: a zeroed descriptor is a valid starting point (plain C struct);
                // every field that matters is set below.
                let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
                desc.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
                desc.location.id = a.ordinal() as i32;
                desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                // SAFETY: `pool` is `b`'s default pool; one descriptor is passed.
                check(
                    unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) },
                    "cuMemPoolSetAccess",
                )?;
            }
        }
    }
    let warnings = matrix
        .staged_pairs()
        .into_iter()
        .map(|(a, b)| {
            format!(
                "GPU {a} cannot access GPU {b} directly (cuDeviceCanAccessPeer = 0): copies between them are staged through host memory by the driver and will be slow"
            )
        })
        .collect();
    Ok((matrix, warnings))
}

impl CudaExecutor {
    /// Verifies `plan`, loads the device kernels (`device_kernels_ptx`, the PTX of
    /// `mercury_lowering::device_kernels_ptx`), compiles the patches the plan uses, allocates
    /// every slot and global buffer, and resolves every operation (so unsupported views and
    /// types fail here, before anything runs). Every rank runs on `ctx`'s GPU (virtual ranks).
    pub fn new(
        ctx: Arc<CudaContext>,
        plan: Plan,
        device_kernels_ptx: &str,
        opts: ExecOptions,
    ) -> Result<Self> {
        let n = plan.ranks.len();
        CudaExecutor::build(
            vec![(0, ctx)],
            vec![0; n],
            vec![true; n],
            false,
            plan,
            device_kernels_ptx,
            opts,
            TransportChoice::Copy,
        )
    }

    /// As [`CudaExecutor::new`], with the ranks placed on GPUs by `placement`: each rank's
    /// slots, streams and events live on its device's (primary) context; peer access is
    /// enabled between the devices where possible; transfers between devices are peer copies
    /// or NCCL (`placement.transport`). Ranks sharing a device behave as virtual ranks. With
    /// [`TransportChoice::NcclWorld`] only the launcher's local ranks run here.
    pub fn new_placed(
        plan: Plan,
        device_kernels_ptx: &str,
        opts: ExecOptions,
        placement: Placement,
    ) -> Result<Self> {
        let n = plan.ranks.len();
        let map = placement.devices.clone();
        let visible = CudaContext::device_count()
            .map_err(RuntimeError::driver("device count"))?
            .max(0) as usize;
        let local: Vec<bool> = match &placement.transport {
            TransportChoice::NcclWorld(w) => {
                let l = w.local_ranks();
                (0..n).map(|r| l.contains(&r)).collect()
            }
            _ => vec![true; n],
        };
        let local_ranks: Vec<usize> = (0..n).filter(|r| local[*r]).collect();
        if map.ranks() != n {
            return Err(RuntimeError::Schedule(format!(
                "the device map has {} entries, the plan {n} ranks",
                map.ranks()
            )));
        }
        let ids = map.ordinals_of(&local_ranks);
        let mut ctxs = Vec::with_capacity(ids.len());
        for id in &ids {
            let o = placement.ordinal_of(*id);
            if o >= visible {
                return Err(RuntimeError::Unsupported(format!(
                    "rank placement uses GPU {o}, but {visible} GPU(s) are visible"
                )));
            }
            ctxs.push((*id, mercury_kernels::cuda::open_context(o)?));
        }
        let rank_dev: Vec<usize> = (0..n)
            .map(|r| {
                if local[r] {
                    ids.iter().position(|o| *o == map.device(r)).unwrap_or(0)
                } else {
                    0
                }
            })
            .collect();
        CudaExecutor::build(
            ctxs,
            rank_dev,
            local,
            true,
            plan,
            device_kernels_ptx,
            opts,
            placement.transport,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        dev_ctxs: Vec<(usize, Arc<CudaContext>)>,
        rank_dev: Vec<usize>,
        local: Vec<bool>,
        placed: bool,
        plan: Plan,
        device_kernels_ptx: &str,
        opts: ExecOptions,
        choice: TransportChoice,
    ) -> Result<Self> {
        mercury_plan::verify(&plan)?;
        let schedule = schedule::build(&plan).map_err(RuntimeError::Schedule)?;
        let nranks = plan.ranks.len();
        let uses = |f: &dyn Fn(&PatchKind) -> bool| {
            plan.ranks.iter().any(|r| {
                r.stages.iter().any(|s| {
                    s.compute
                        .iter()
                        .any(|op| matches!(op, ComputeOp::Patch { patch, .. } if f(patch)))
                })
            })
        };
        let uses_gemm = uses(&|p| matches!(p, PatchKind::Gemm { .. }));
        let ids: Vec<usize> = dev_ctxs.iter().map(|(i, _)| *i).collect();
        let ctxs: Vec<Arc<CudaContext>> = dev_ctxs.into_iter().map(|(_, c)| c).collect();
        let uses_attention = uses(&|p| matches!(p, PatchKind::Attention { .. }));

        // Per device: kernels, patches, an allocation stream (the hub on the main device).
        let mut warnings = Vec::new();
        let mut devs = Vec::with_capacity(ctxs.len());
        let mut dks = Vec::with_capacity(ctxs.len());
        let mut max_pitch = Vec::with_capacity(ctxs.len());
        for ctx in &ctxs {
            ctx.bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            dks.push(DeviceKernels::load(ctx, device_kernels_ptx)?);
            let gemm = if uses_gemm {
                Some(GemmPatch::new(ctx, opts.gemm_workspace_bytes)?)
            } else {
                None
            };
            let cudnn = if uses_attention && opts.attention == AttnBackend::Cudnn {
                match cudnn_patch(ctx) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        warnings.push(format!(
                            "cuDNN attention unavailable, using the NVRTC kernel: {e}"
                        ));
                        None
                    }
                }
            } else {
                None
            };
            // The NVRTC kernel is compiled below, once some block needs it.
            max_pitch.push(
                ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_PITCH)
                    .map_err(RuntimeError::driver("max pitch"))?
                    .max(0) as usize,
            );
            devs.push(DeviceRes {
                id: 0,
                ctx: ctx.clone(),
                gemm,
                attention: None,
                cudnn,
                stream: ctx
                    .new_stream()
                    .map_err(RuntimeError::driver("create stream"))?,
            });
        }
        for (d, id) in devs.iter_mut().zip(&ids) {
            d.id = *id;
        }
        let hub = devs[0].stream.clone();
        // Where a location of the main device lives, as copies see it.
        let main_dev = placed.then_some(ids[0]);
        let peers = if placed {
            if ctxs.len() > 1 {
                let (_m, w) = enable_peer_access(&ctxs)?;
                warnings.extend(w);
            }
            Some(Peers::new(
                ids.iter()
                    .zip(&ctxs)
                    .map(|(i, c)| (*i, c.cu_ctx()))
                    .collect(),
            ))
        } else {
            None
        };

        // Global buffers on the main device.
        ctxs[0]
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
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

        // Slots, streams and events of every rank, on its device. Ranks of other processes
        // get idle placeholder streams on the main device and no slots (their slots are
        // listed with address 0 for shapes and types).
        let mut mem = MemTable::default();
        if placed {
            mem.devs = rank_dev.iter().map(|d| ids[*d]).collect();
            mem.remote = local.iter().map(|l| !l).collect();
        }
        let mut ranks = Vec::with_capacity(nranks);
        let mut transfer_streams = Vec::with_capacity(nranks);
        let mut transfer_scratch = Vec::with_capacity(nranks);
        for (ri, r) in plan.ranks.iter().enumerate() {
            let d = rank_dev[ri];
            let ctx = &ctxs[d];
            let new_stream = || {
                ctx.new_stream()
                    .map_err(RuntimeError::driver("create stream"))
            };
            let compute = new_stream()?;
            let transfer = new_stream()?;
            let mut slots = Vec::with_capacity(r.slots.len());
            let mut infos = Vec::with_capacity(r.slots.len());
            for s in &r.slots {
                let ptr = if local[ri] {
                    let (buf, ptr) = alloc(&devs[d].stream, s.bytes())?;
                    slots.push(buf);
                    ptr
                } else {
                    0
                };
                infos.push(SlotInfo {
                    ptr,
                    dtype: s.dtype,
                    shape: s.shape.clone(),
                });
            }
            mem.ranks.push(infos);
            let ws = match (&devs[d].gemm, local[ri]) {
                (Some(_), true) => Some(GemmWorkspace::new(&compute, opts.gemm_workspace_bytes)?),
                _ => None,
            };
            ranks.push(RankState {
                local: local[ri],
                dev: d,
                scratch: Scratch::new(compute.clone()),
                compute,
                ev_compute: new_event(ctx, false)?,
                ev_transfer: new_event(ctx, false)?,
                ws,
                _slots: slots,
                _parts: Vec::new(),
                init: Vec::new(),
                stages: Vec::new(),
                outputs: Vec::new(),
            });
            transfer_scratch.push(Scratch::new(transfer.clone()));
            transfer_streams.push(transfer);
        }
        for d in &devs {
            d.stream
                .synchronize()
                .map_err(RuntimeError::driver("synchronize allocations"))?;
        }

        // Each rank's device id and CUDA ordinal.
        let id_map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ids[*d]).collect());
        let map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ctxs[*d].ordinal()).collect());
        let world_size = match &choice {
            TransportChoice::NcclWorld(w) => Some(w.env().world_size),
            _ => None,
        };
        let transport: Box<dyn Transport> = match choice {
            TransportChoice::Copy if placed => Box::new(CopyTransport::placed(id_map.clone())),
            TransportChoice::Copy => Box::new(CopyTransport::single_device()),
            TransportChoice::Nccl => {
                let t = NcclTransport::single_process(&map, &id_map, &distinct_groups(&plan))?;
                if !t.fallback_groups().is_empty() {
                    warnings.push(format!(
                        "NCCL: {} group(s) have members sharing a GPU ({:?}...); they use device copies",
                        t.fallback_groups().len(),
                        t.fallback_groups()[0]
                    ));
                }
                Box::new(t)
            }
            TransportChoice::NcclWorld(w) => {
                Box::new(NcclTransport::from_world(w, &map, &distinct_groups(&plan))?)
            }
        };
        for w in &warnings {
            eprintln!("mercury-runtime: warning: {w}");
        }

        // Resolve every operation of this process's ranks against the real addresses.
        for (ri, r) in plan.ranks.iter().enumerate() {
            if !local[ri] {
                continue;
            }
            let mut init = Vec::with_capacity(r.slots.len());
            for (si, s) in r.slots.iter().enumerate() {
                let info = &mem.ranks[ri][si];
                let full = Region::full(&s.shape);
                let here = mem.devs.get(ri).copied();
                // Copies of regions of global input `buffer` into regions of this slot.
                let input_copies = |globals: &[GlobalMem],
                                    buffer: usize,
                                    pieces: &mut dyn Iterator<Item = (&Region, &Region)>,
                                    main: Option<usize>|
                 -> Result<Vec<(Loc, Loc)>> {
                    let g = globals.get(buffer).ok_or_else(|| {
                        RuntimeError::Io(format!("slot '{}' reads buffer #{buffer}", s.name))
                    })?;
                    if g.role != Role::Input {
                        return Err(RuntimeError::Io(format!(
                            "slot '{}' of rank {ri} is initialised from output buffer #{buffer}",
                            s.name
                        )));
                    }
                    let mut out = Vec::new();
                    for (region, at) in pieces {
                        let src = Loc::of(g.ptr, g.dtype, &g.shape, region)?.on(main);
                        let dst = Loc::of(info.ptr, s.dtype, &s.shape, at)?.on(here);
                        check_copy(&src, &dst)?;
                        out.push((src, dst));
                    }
                    Ok(out)
                };
                init.push(match &s.init {
                    SlotInit::Uninit if opts.poison_uninit => InitLaunch::Poison,
                    SlotInit::Uninit => InitLaunch::Nothing,
                    SlotInit::Zero => InitLaunch::Zero,
                    SlotInit::NegInf => {
                        mem::neg_inf_pattern(s.dtype)?;
                        InitLaunch::NegInf(Loc::of(info.ptr, s.dtype, &s.shape, &full)?)
                    }
                    SlotInit::FromGlobal { buffer, region } => {
                        let mut c = input_copies(
                            &globals,
                            *buffer,
                            &mut [(region, &full)].into_iter(),
                            main_dev,
                        )?;
                        let (src, dst) = c.pop().expect("one copy");
                        InitLaunch::Copy { src, dst }
                    }
                    SlotInit::FromGlobalPieces { buffer, pieces } => {
                        InitLaunch::Copies(input_copies(
                            &globals,
                            *buffer,
                            &mut pieces.iter().map(|p| (&p.region, &p.at)),
                            main_dev,
                        )?)
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
                let dst = Loc::of(g.ptr, g.dtype, &g.shape, &o.region)?.on(main_dev);
                check_copy(&src, &dst)?;
                outputs.push((src, dst));
            }
            // Attention: the cuDNN patch where it takes the block, else the NVRTC kernel.
            let dev = &mut devs[rank_dev[ri]];
            for op in stages.iter_mut().flatten() {
                let ComputeLaunch::Attention { launch, via } = op else {
                    continue;
                };
                let refusal = match &dev.cudnn {
                    Some(c) => match ops::cudnn_choice(c, launch) {
                        Ok(split) => {
                            *via = AttnVia::Cudnn(Box::new(split));
                            continue;
                        }
                        Err(e) => Some(e),
                    },
                    None => None,
                };
                if dev.attention.is_none() {
                    dev.attention = Some(attention_patch(&dev.ctx, opts.attention_variant)?);
                }
                if let Some(why) = refusal {
                    let d = launch.dims;
                    let w = format!(
                        "attention b{} hq{} hk{} sq{} sk{} d{}: cuDNN refused ({why}); using the NVRTC kernel",
                        d.b, d.hq, d.hk, d.sq, d.sk, d.d
                    );
                    if !warnings.contains(&w) {
                        eprintln!("mercury-runtime: warning: {w}");
                        warnings.push(w);
                    }
                }
                *via = AttnVia::Nvrtc;
            }
            // Ring steps into one accumulator: keep each block's part and merge the group in one
            // pass at its last block (reads every part once, the accumulator once).
            if let Some(cudnn) = dev.cudnn.clone().filter(|_| opts.defer_merges) {
                let groups = ops::defer_groups(
                    &plan.ranks[ri],
                    |si, oi| {
                        matches!(
                            stages.get(si).and_then(|st| st.get(oi)),
                            Some(ComputeLaunch::Attention {
                                via: AttnVia::Cudnn(_),
                                ..
                            })
                        )
                    },
                    ops::MAX_DEFERRED_PARTS,
                );
                for g in groups {
                    if let Some(buf) = defer_group(&cudnn, &dev.stream, &mut stages, &g)? {
                        ranks[ri]._parts.push(buf);
                    }
                }
            }
            ranks[ri].init = init;
            ranks[ri].stages = stages;
            ranks[ri].outputs = outputs;
        }
        for st in &schedule.stages {
            for m in &st.messages {
                if local[m.src_rank] || local[m.dst_rank] {
                    transport.check_message(&mem, m)?;
                }
            }
            for c in &st.collectives {
                if c.group.iter().any(|r| local[*r]) {
                    transport.check_collective(&mem, c)?;
                }
            }
        }
        // Streams of other processes' ranks never get work.
        let keep = |w: Work| -> Work { w.into_iter().filter(|(y, _)| local[*y]).collect() };
        let touches = schedule::stage_touches_work(
            &schedule,
            nranks,
            |si, r| local[r] && ranks[r].stages.get(si).is_some_and(|o| !o.is_empty()),
            |m| keep(transport.message_work(m)),
            |c| keep(transport.collective_work(c)),
        );
        let peer = schedule::peer_waits(&touches, nranks);

        // Progress marks: each local rank's compute stream after the initialisation and after
        // the output gather, every stream with work after each stage (`peer[si].record`).
        let stages = schedule.len();
        let local_ranks: Vec<usize> = (0..nranks).filter(|r| local[*r]).collect();
        let mut mark_at: Vec<(usize, usize)> = local_ranks
            .iter()
            .map(|r| (0, schedule::compute_stream(*r)))
            .collect();
        for (si, w) in peer.iter().enumerate() {
            mark_at.extend(w.record.iter().map(|y| (si + 1, *y)));
        }
        mark_at.extend(
            local_ranks
                .iter()
                .map(|r| (stages + 1, schedule::compute_stream(*r))),
        );
        let mut marks = Vec::with_capacity(mark_at.len());
        for (_, y) in &mark_at {
            // Stream y belongs to rank y % nranks (compute r, transfer nranks + r).
            marks.push(new_event(&ctxs[rank_dev[y % nranks]], false)?);
        }
        let gpu_of = |r: usize| ctxs[rank_dev[r]].ordinal();
        let labels: Vec<String> = (0..nranks)
            .map(|r| match world_size {
                Some(p) if !local[r] && p > 0 => {
                    format!("rank {r} (process {})", r / (nranks / p).max(1))
                }
                _ if !local[r] => format!("rank {r}"),
                _ => format!("rank {r} (GPU {})", gpu_of(r)),
            })
            .collect();
        let who = Arc::new(Who {
            ranks: local_ranks.clone(),
            gpus: local_ranks.iter().map(|r| gpu_of(*r)).collect(),
            pid: std::process::id(),
        });
        let stage_peers = Arc::new(
            schedule
                .stages
                .iter()
                .map(|st| {
                    schedule::stage_partners(st, &local_ranks)
                        .into_iter()
                        .map(|r| labels[r].clone())
                        .collect()
                })
                .collect(),
        );
        let mut hang_word = None;
        if let Some(f) = &opts.fault {
            f.validate(nranks, stages)
                .map_err(RuntimeError::Unsupported)?;
            if f.kind == FaultKind::Hang && local[f.rank] {
                let d = rank_dev[f.rank];
                ctxs[d]
                    .bind_to_thread()
                    .map_err(RuntimeError::driver("bind context"))?;
                let (buf, ptr) = alloc(&devs[d].stream, 256)?;
                // SAFETY: `ptr` holds 256 bytes on this stream's device.
                unsafe { mem::zero(&devs[d].stream, ptr, 256)? };
                devs[d]
                    .stream
                    .synchronize()
                    .map_err(RuntimeError::driver("synchronize"))?;
                hang_word = Some((buf, ptr));
            }
        }
        let main = &ctxs[0];
        let ev_time = [
            new_event(main, true)?,
            new_event(main, true)?,
            new_event(main, true)?,
            new_event(main, true)?,
        ];
        Ok(CudaExecutor {
            ev_barrier: new_event(main, false)?,
            ev_time,
            devs,
            dks,
            max_pitch,
            rank_dev,
            peers,
            plan,
            schedule,
            mem,
            ranks,
            transfer_streams,
            transfer_scratch,
            globals,
            hub,
            transport,
            peer,
            marks,
            tracker: MarkTracker::new(mark_at),
            who,
            stage_peers,
            labels,
            hang_word,
            injected: false,
            runs: 0,
            cur_phase: 0,
            faulted: false,
            warnings,
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

    /// CUDA device ordinals in use (the first holds the global buffers; an ordinal repeats
    /// when device ids alias a GPU).
    pub fn device_ordinals(&self) -> Vec<usize> {
        self.devs.iter().map(|d| d.ctx.ordinal()).collect()
    }

    /// CUDA device ordinal of `rank`.
    pub fn rank_device(&self, rank: usize) -> usize {
        self.devs[self.rank_dev[rank]].ctx.ordinal()
    }

    /// The ranks this process drives (all, except under a launcher).
    pub fn local_ranks(&self) -> Vec<usize> {
        (0..self.ranks.len())
            .filter(|r| self.ranks[*r].local)
            .collect()
    }

    /// Warnings of the construction (host-staged peer copies, NCCL groups on copies).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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

    /// Device address of global buffer `buffer` (dense, row-major, its dtype), on the main
    /// device.
    pub fn global_ptr(&self, buffer: usize) -> Result<u64> {
        Ok(self.global(buffer)?.ptr)
    }

    fn bind_main(&self) -> Result<()> {
        self.devs[0]
            .ctx
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))
    }

    fn synchronize_all(&self, what: &'static str) -> Result<()> {
        if self.faulted {
            return Err(RuntimeError::Unsupported(
                "this executor stopped after a fault; its queued work may never finish".into(),
            ));
        }
        for d in &self.devs {
            d.ctx.synchronize().map_err(RuntimeError::driver(what))?;
        }
        self.bind_main()
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
        self.bind_main()?;
        self.hub
            .synchronize()
            .map_err(RuntimeError::driver("synchronize before upload"))?;
        // SAFETY: `ptr` is the buffer's allocation (main device, whose context is current),
        // sized for exactly `data.len()` elements of the host type (checked above); the copy
        // is synchronous.
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

    /// Downloads global buffer `buffer` (after [`CudaExecutor::run`]). Under a launcher only
    /// the pieces of this process's ranks are written (the rest reads as NaN).
    pub fn download(&self, buffer: usize) -> Result<HostData> {
        let g = self.global(buffer)?;
        self.synchronize_all("synchronize before download")?;
        let n = g.numel();
        // SAFETY: the allocation holds `n` elements of the buffer's dtype, on the main
        // device, whose context is current.
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

    /// Every local rank stream records, the hub waits on all and records the barrier, every
    /// local rank stream waits on the barrier (events of other devices included: stream waits
    /// cross devices).
    fn barrier(&self) -> Result<()> {
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
    /// waits for the devices by polling the progress marks.
    ///
    /// # Errors
    /// [`RuntimeError::Fault`] when no stream finishes its work of a stage within
    /// [`ExecOptions::stage_timeout`] or NCCL reports an asynchronous error (the transport is
    /// aborted first, and the executor refuses further runs); CUDA and NCCL call failures;
    /// inputs never uploaded.
    pub fn run(&mut self) -> Result<RunTiming> {
        if self.faulted {
            return Err(RuntimeError::Unsupported(
                "this executor stopped after a fault (its transport is aborted); build a new one"
                    .into(),
            ));
        }
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
        match self.run_inner() {
            Ok(t) => Ok(t),
            Err(e @ RuntimeError::Fault(_)) => Err(e),
            // Peers in other processes may wait on work this run never enqueued: abort the
            // communicators, and say where it happened.
            Err(e) if self.transport.can_abort() => {
                Err(self.fault(self.cur_phase, &[], Cause::Failed(e.to_string())))
            }
            Err(e) => Err(e),
        }
    }

    /// The body of [`CudaExecutor::run`] (armed, counted); keeps `cur_phase` current.
    fn run_inner(&mut self) -> Result<RunTiming> {
        let stages = self.schedule.len();
        let progress = fault::progress();
        self.tracker.reset();
        // Marks enqueued so far.
        let mut enq = 0;
        self.bind_main()?;
        let rec =
            |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(RuntimeError::driver("record"));
        // Poison the outputs; everything starts after the hub's work (uploads, fills).
        for g in self.globals.iter().filter(|g| g.role == Role::Output) {
            // SAFETY: the allocation holds `bytes()` bytes (main device, current).
            unsafe { mem::poison(&self.hub, g.ptr, g.bytes(), g.dtype)? };
        }
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
            for (src, dst) in &r.outputs {
                cx.scratch.reset();
                // SAFETY: resolved against this executor's memory in `new`.
                unsafe { mem::copy(&mut cx, src, dst)? };
            }
        }
        self.record_marks(stages + 1, &mut enq)?;
        self.bind_main()?;
        self.barrier()?;
        rec(&self.ev_time[3], &self.hub)?;
        progress.doing("waiting for the device (polling progress events)");
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

    /// Records the marks of phase index `phase` (0 = initialisation, 1..=stages, stages + 1 =
    /// outputs) on their streams; `enq` counts the marks recorded so far in this run.
    fn record_marks(&self, phase: usize, enq: &mut usize) -> Result<()> {
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
    fn poll_marks(&mut self, upto: usize) -> std::result::Result<fault::WaitEnd, WaitErr> {
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
    fn wait_marks(&mut self, upto: usize) -> Result<()> {
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
    fn fault(&mut self, phase: usize, streams: &[usize], cause: Cause) -> RuntimeError {
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
    fn due_fault(&self, si: usize) -> Option<FaultSpec> {
        let f = self.opts.fault?;
        let here = self.ranks.get(f.rank).is_some_and(|r| r.local);
        (!self.injected && here && f.stage == si + 1 && f.run == self.runs).then_some(f)
    }

    /// Injects `f` before stage `si` (`enq` marks are enqueued); see `cuda::fault`.
    fn inject(&mut self, f: FaultSpec, si: usize, enq: usize) -> Result<()> {
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
                eprintln!(
                    "mercury-runtime: fault injection {f}: {me} kills its process with SIGKILL before stage {}/{stages}",
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
                eprintln!(
                    "mercury-runtime: fault injection {f}: the streams of {me} wait forever from stage {}/{stages} on (device-side hang)",
                    si + 1
                );
                Ok(())
            }
            FaultKind::HostHang => {
                eprintln!(
                    "mercury-runtime: fault injection {f}: the host thread of {me} blocks forever before stage {}/{stages}",
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
