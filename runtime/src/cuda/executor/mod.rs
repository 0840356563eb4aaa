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
//! Slot initialisation and the output gather are fenced by full barriers in both modes.
//! [`CudaExecutor::run`] waits once, at the end, by polling events (never a blocking
//! synchronize): every stream with work in a stage records a *mark* after it, and a run that
//! sees no mark complete for [`ExecOptions::stage_timeout`] ends with [`RuntimeError::Fault`]
//! naming the stage, the ranks that did not finish it and their peers, after aborting the
//! transport (NCCL: `ncclCommAbort`); NCCL's asynchronous errors are polled on the way
//! (`cuda::fault`). [`CudaExecutor::launch`] enqueues a run after the work on a caller's
//! stream (PyTorch's current stream), makes that stream wait for the run's end and returns
//! without waiting: the same polling happens at [`CudaExecutor::wait`], and device errors the
//! driver has reported by then surface at the next launch.
//!
//! Global buffers are the executor's own allocations ([`ExecOptions::own_globals`]; uploaded
//! and downloaded by the host) or the caller's memory, bound per run with
//! [`CudaExecutor::bind_global`] (`bind.rs`): any strides for inputs, the whole buffer or this
//! process's shards of it, read and written where they are.
//!
//! Slot initialisation: `FromGlobal` copies its region of the uploaded global input
//! (`FromGlobalPieces` several regions side by side: a zigzag or striped shard),
//! `Zero` zeroes, `NegInf` sets every element to minus infinity (the lse half of an empty
//! softmax accumulator; its o half is a `Zero` slot), and `Uninit` is poisoned with NaN.
//! Global outputs are poisoned before every run, so a region no rank writes reads back as NaN.
//!
//! Files: this one holds the options, the placement and the executor's state; `build.rs`
//! constructs it and resolves every operation, `attention.rs` picks the attention patch of each
//! block and forms the deferred-merge groups, `run.rs` is the run loop with its stage
//! synchronisation, `watch.rs` waits for a run (progress marks, faults, fault injection),
//! `host.rs` uploads and downloads global buffers, `bind.rs` binds them to a caller's memory,
//! `peers.rs` enables peer access.

mod attention;
mod attention_bwd;
mod bind;
mod build;
mod direct;
mod fresh;
mod host;
mod masked;
mod peers;
mod run;
mod watch;

pub use host::{HostBuffer, HostData};
pub use peers::enable_peer_access;

use crate::cuda::device_kernels::DeviceKernels;
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::fault::{self, FaultSpec, MarkTracker, Who};
use crate::cuda::launcher::World;
use crate::cuda::mem::{Loc, MemTable, Peers, Scratch};
use crate::cuda::ops::ComputeLaunch;
use crate::cuda::placement::DeviceMap;
use crate::cuda::schedule::{Schedule, StageSync, StageWaits};
use crate::cuda::transport::Transport;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use mercury_kernels::cuda::{
    alloc_bytes, AttentionF32Patch, AttentionPatch, AttnVariant, CudnnAttention, DeviceBuffer,
    GemmPatch, GemmWorkspace,
};
use mercury_plan::{DType, Plan, Region, Role};
use std::sync::Arc;
use std::time::Duration;

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
    /// Allocate every global buffer (off: none is, and each must be bound to the caller's
    /// memory with [`CudaExecutor::bind_global`] before a run: the Python package's tensors).
    pub own_globals: bool,
    /// Direct binding (`direct.rs`): cuDNN blocks read input buffers and write output buffers
    /// where they are bound, where they can (off: always through the slots; to measure it).
    pub direct_binding: bool,
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
            own_globals: true,
            direct_binding: true,
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
    Zero,
    NegInf(Loc),
    Poison,
    Nothing,
    /// A slot filled from several regions of a global input (a zigzag or striped shard).
    Copies(Vec<(Loc, Loc)>),
}

/// Memory that holds a region of a global buffer: the executor's own allocation (the whole
/// buffer, row-major), or a caller's tensor bound with [`CudaExecutor::bind_global`] (the
/// whole buffer, or under a launcher the shard of this process's ranks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundRegion {
    /// The region of the buffer it holds (offsets and extents in the buffer's index space).
    pub region: Region,
    /// Device address of the region's first element (element `region.offset`), on the main
    /// device.
    pub ptr: u64,
    /// Element strides of the memory, one per buffer dimension (a PyTorch tensor's
    /// `stride()`; any order, none zero where the extent exceeds 1).
    pub strides: Vec<usize>,
}

impl BoundRegion {
    /// Whether `r` lies inside this region.
    fn contains(&self, r: &Region) -> bool {
        self.region.offset.len() == r.offset.len()
            && (0..r.offset.len()).all(|d| {
                self.region.offset[d] <= r.offset[d]
                    && r.offset[d] + r.extent[d] <= self.region.offset[d] + self.region.extent[d]
            })
    }

    /// Whether its elements fill one run of memory without overlap: the strides are the
    /// row-major strides of its extents in some order of the dimensions (a transposed dense
    /// tensor, as PyTorch's "non-overlapping and dense"). Its first element is then the run's
    /// start.
    fn is_dense(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .strides
            .iter()
            .zip(&self.region.extent)
            .filter(|(_, e)| **e > 1)
            .map(|(s, e)| (*s, *e))
            .collect();
        dims.sort_unstable();
        let mut want = 1;
        for (s, e) in dims {
            if s != want {
                return false;
            }
            want *= e;
        }
        true
    }
}

struct GlobalMem {
    /// The executor's own allocation (`ExecOptions::own_globals`).
    own: Option<DeviceBuffer>,
    /// The memory the buffer's regions are read from or written to: the own allocation, or
    /// the caller's (never empty: an unbound buffer has one placeholder at address 0 and is
    /// not `ready`).
    pieces: Vec<BoundRegion>,
    dtype: DType,
    shape: Vec<usize>,
    role: Role,
    /// Inputs: uploaded or bound; outputs: memory to write (own, or bound).
    ready: bool,
    /// Per piece of an output: poisoned (NaN) before every run, so that an element no rank
    /// writes reads back as NaN. Off for a bound piece the local ranks' output writes are
    /// proven to cover (what makes a non-dense piece bindable).
    poison: Vec<bool>,
}

impl GlobalMem {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The address of the executor's own allocation while the buffer is not bound to a
    /// caller's memory.
    fn own_ptr(&self, name: &str) -> Result<u64> {
        match (&self.own, self.pieces.as_slice()) {
            (Some(_), [p]) if p.region == Region::full(&self.shape) && p.ptr != 0 => Ok(p.ptr),
            _ => Err(RuntimeError::Io(format!(
                "global buffer '{name}' is bound to the caller's memory (or has none of the executor's own)"
            ))),
        }
    }
}

/// Where a rank's launches touch a global buffer: re-resolved when the buffer is bound anew.
struct GlobalUse {
    buffer: usize,
    region: Region,
    at: UseAt,
    /// Index of the bound region (`GlobalMem::pieces`) holding `region`.
    piece: usize,
}

/// Which location of a rank reads or writes a global buffer.
#[derive(Clone, Copy)]
enum UseAt {
    /// The source of slot `slot`'s initialisation (`Some(i)`: its `i`-th piece).
    Init(usize, Option<usize>),
    /// The destination of output piece `i`.
    Output(usize),
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
    _slots: Vec<DeviceBuffer>,
    /// Part buffers of the attention blocks whose merges are deferred (one per group).
    _parts: Vec<DeviceBuffer>,
    init: Vec<InitLaunch>,
    stages: Vec<Vec<ComputeLaunch>>,
    outputs: Vec<(Loc, Loc)>,
    /// Where `init` and `outputs` touch global buffers.
    uses: Vec<GlobalUse>,
    /// What of the rank's attention may read and write global buffers directly
    /// (`direct.rs`), and per run which slot initialisations and output pieces that skips.
    direct: direct::DirectPlan,
    skip_init: Vec<bool>,
    skip_out: Vec<bool>,
}

/// Per device: its context, the patches compiled for it and an allocation stream.
struct DeviceRes {
    /// Device id (what locations carry; the CUDA ordinal unless ids alias GPUs).
    id: usize,
    ctx: Arc<CudaContext>,
    gemm: Option<GemmPatch>,
    attention: Option<Arc<AttentionPatch>>,
    attention_f32: Option<Arc<AttentionF32Patch>>,
    cudnn: Option<Arc<CudnnAttention>>,
    stream: Arc<CudaStream>,
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
    /// Where a location of the main device lives as copies see it (`None`: unplaced).
    main_dev: Option<usize>,
    hub: Arc<CudaStream>,
    ev_barrier: CudaEvent,
    ev_time: [CudaEvent; 4],
    /// Recorded on a caller's stream by [`CudaExecutor::launch`]: the hub waits on it.
    ev_caller: CudaEvent,
    /// Marks enqueued by a launched run not yet waited for ([`CudaExecutor::wait`]).
    pending: Option<usize>,
    /// Device times of the last run waited for.
    last_timing: Option<RunTiming>,
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
    hang_word: Option<(DeviceBuffer, u64)>,
    /// The one local rank of a plan that moves nothing between ranks, when it runs on the
    /// main device: runs take the lean path (`run.rs`, `enqueue_lean`).
    lean: Option<usize>,
    /// Host time of the last [`CudaExecutor::launch`] (or the enqueue half of a run).
    last_enqueue: Duration,
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

/// `bytes` of device memory for `stream` (torch's caching allocator inside a PyTorch program,
/// see `mercury_kernels::cuda::alloc`).
fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<(DeviceBuffer, u64)> {
    // SAFETY: contents are initialised (copied, filled or poisoned) before any use.
    let buf = unsafe { alloc_bytes(stream, bytes.max(256), "allocate a slot") }?;
    let ptr = buf.ptr();
    Ok((buf, ptr))
}

impl CudaExecutor {
    /// Host time of the last launch (or of the enqueue half of the last run), from the call to
    /// its return: the previous run's progress polled, the direct bindings decided, the run
    /// enqueued. Binding addresses aside, what a call on a cached shape costs the host here.
    pub fn last_enqueue_time(&self) -> Duration {
        self.last_enqueue
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
    /// device: the executor's own allocation (an error for a buffer bound to the caller's
    /// memory).
    pub fn global_ptr(&self, buffer: usize) -> Result<u64> {
        self.global(buffer)?
            .own_ptr(&self.plan.buffers[buffer].name)
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
}
