//! Construction: contexts and patches per device, slots and streams per rank, the transport,
//! and the resolution of every operation against the real addresses (so unsupported views
//! and types fail before anything runs); the progress marks and fault bookkeeping.

use super::attention::{choose_attention, cudnn_patch};
use super::attention_bwd::check_attention_bwd;
use super::bind::global_loc;
use super::fresh::overwrite_fresh_accumulators;
use super::peers::enable_peer_access;
use super::{
    alloc, new_event, AttnBackend, BoundRegion, CudaExecutor, DeviceRes, ExecOptions, GlobalMem,
    GlobalUse, InitLaunch, Placement, RankState, TransportChoice, UseAt,
};
use crate::cuda::device_kernels::DeviceKernels;
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::fault::{FaultKind, MarkTracker, Who};
use crate::cuda::layout::row_major_strides;
use crate::cuda::mem::{self, Loc, MemTable, Peers, Scratch, SlotInfo};
use crate::cuda::nccl::NcclTransport;
use crate::cuda::ops::{self, check_copy, ComputeLaunch};
use crate::cuda::placement::{distinct_groups, DeviceMap};
use crate::cuda::schedule;
use crate::cuda::schedule::StageWaits;
use crate::cuda::transport::{CopyTransport, Transport, Work};
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use cudarc::driver::{CudaEvent, CudaStream};
use mercury_kernels::cuda::DeviceBuffer;
use mercury_kernels::cuda::{GemmPatch, GemmWorkspace};
use mercury_plan::{ComputeOp, PatchKind, Plan, Region, Role, SlotInit};
use std::sync::Arc;
use std::time::Duration;

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

    /// The constructors' common body, in order: verify and schedule the plan; open the
    /// transport (collective under a launcher, so only deterministic checks come before it);
    /// per device the kernels and patches; peer access; the global buffers; per rank its
    /// slots and streams; every operation resolved against the real addresses; the
    /// transport's checks of every transfer; the progress marks and fault bookkeeping.
    /// `dev_ctxs` are (device id, context) of this process's devices, `rank_dev` each rank's
    /// index into them, `local` whether this process drives the rank, `placed` whether the
    /// ranks were placed by [`Placement`] (locations then carry device ids).
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
        let ids: Vec<usize> = dev_ctxs.iter().map(|(i, _)| *i).collect();
        let ctxs: Vec<Arc<CudaContext>> = dev_ctxs.into_iter().map(|(_, c)| c).collect();
        let mut warnings = Vec::new();
        let world_size = match &choice {
            TransportChoice::NcclWorld(w) => Some(w.env().world_size),
            _ => None,
        };

        let transport =
            open_transport(&ctxs, &ids, &rank_dev, placed, &plan, choice, &mut warnings)?;
        // The plan-level refusals, the same in every process.
        for st in &schedule.stages {
            for c in &st.collectives {
                transport.check_plan_collective(c)?;
            }
        }

        let DeviceSetup {
            mut devs,
            dks,
            max_pitch,
        } = DeviceSetup::open(
            &ctxs,
            &ids,
            PatchUse::of(&plan),
            device_kernels_ptx,
            &opts,
            &mut warnings,
        )?;
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
        let globals = alloc_globals(&ctxs[0], &hub, &plan, opts.own_globals)?;
        let RankSetup {
            mem,
            mut ranks,
            transfer_streams,
            transfer_scratch,
        } = RankSetup::alloc(&plan, &ctxs, &devs, &ids, &rank_dev, &local, placed, &opts)?;
        for w in &warnings {
            tracing::warn!("{w}");
        }

        // Resolve every operation of this process's ranks against the real addresses.
        for (ri, r) in plan.ranks.iter().enumerate() {
            if !local[ri] {
                continue;
            }
            let mut resolved = Resolved::of(r, ri, &mem, &globals, &dks, main_dev, &opts)?;
            // A block that is the first to touch its accumulator overwrites it.
            overwrite_fresh_accumulators(r, &mut resolved.init, &mut resolved.stages);
            let mut stages = resolved.stages;
            // Attention: the cuDNN patch where it takes the block, else the NVRTC kernel.
            let parts = choose_attention(
                &mut devs[rank_dev[ri]],
                &plan.ranks[ri],
                &mut stages,
                &opts,
                &mut warnings,
            )?;
            check_attention_bwd(&devs[rank_dev[ri]], &stages, &opts)?;
            let rank = &mut ranks[ri];
            rank._parts.extend(parts);
            rank.skip_init = vec![false; resolved.init.len()];
            rank.init = resolved.init;
            rank.stages = stages;
            rank.skip_out = vec![false; resolved.outputs.len()];
            rank.outputs = resolved.outputs;
            rank.uses = resolved.uses;
            if opts.attention == AttnBackend::Cudnn && opts.direct_binding {
                rank.direct = super::direct::analyse(&plan, r);
            }
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
        let local_ranks: Vec<usize> = (0..nranks).filter(|r| local[*r]).collect();
        let (marks, mark_at) = progress_marks(
            &peer,
            &local_ranks,
            &ctxs,
            &rank_dev,
            nranks,
            schedule.len(),
        )?;
        let gpu_of = |r: usize| ctxs[rank_dev[r]].ordinal();
        let labels = rank_labels(nranks, &local, world_size, gpu_of);
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
        let hang_word = hang_word(
            &opts,
            nranks,
            schedule.len(),
            &local,
            &ctxs,
            &devs,
            &rank_dev,
        )?;
        let main = &ctxs[0];
        let ev_time = [
            new_event(main, true)?,
            new_event(main, true)?,
            new_event(main, true)?,
            new_event(main, true)?,
        ];
        let moves_nothing = schedule
            .stages
            .iter()
            .all(|st| st.messages.is_empty() && st.collectives.is_empty());
        let lean = match local_ranks.as_slice() {
            [r] if moves_nothing && rank_dev[*r] == 0 => Some(*r),
            _ => None,
        };
        Ok(CudaExecutor {
            lean,
            last_enqueue: Duration::ZERO,
            ev_barrier: new_event(main, false)?,
            ev_caller: new_event(main, false)?,
            pending: None,
            last_timing: None,
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
            main_dev,
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
}

/// Which patches a plan's compute operations need compiled.
#[derive(Clone, Copy)]
struct PatchUse {
    /// A GEMM patch, or a tile matmul (which runs on the GEMM patch too).
    gemm: bool,
    /// An attention patch.
    attention: bool,
}

impl PatchUse {
    fn of(plan: &Plan) -> PatchUse {
        let ops = || {
            plan.ranks
                .iter()
                .flat_map(|r| r.stages.iter().flat_map(|s| s.compute.iter()))
        };
        let patch = |f: &dyn Fn(&PatchKind) -> bool| {
            ops().any(|op| matches!(op, ComputeOp::Patch { patch, .. } if f(patch)))
        };
        let tile_matmul = ops().any(|op| {
            matches!(
                op,
                ComputeOp::Tile {
                    tile: mercury_plan::TileOp::Matmul { .. },
                    ..
                }
            )
        });
        PatchUse {
            gemm: tile_matmul || patch(&|p| matches!(p, PatchKind::Gemm { .. })),
            attention: patch(&|p| {
                matches!(
                    p,
                    PatchKind::Attention { .. } | PatchKind::AttentionBwd { .. }
                )
            }),
        }
    }
}

/// Opens the transport `choice` names, bound to the main device (`ctxs[0]`). Under a launcher
/// its communicator splits are collective: every process reaches them or fails alike, since
/// only the deterministic plan checks come before (no local failure may leave another process
/// waiting in a split). `ids` are the devices' ids, `rank_dev` each rank's device index; NCCL
/// groups whose members share a GPU fall back to copies, with a warning.
fn open_transport(
    ctxs: &[Arc<CudaContext>],
    ids: &[usize],
    rank_dev: &[usize],
    placed: bool,
    plan: &Plan,
    choice: TransportChoice,
    warnings: &mut Vec<String>,
) -> Result<Box<dyn Transport>> {
    // Each rank's device id and CUDA ordinal.
    let id_map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ids[*d]).collect());
    let map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ctxs[*d].ordinal()).collect());
    ctxs[0]
        .bind_to_thread()
        .map_err(RuntimeError::driver("bind context"))?;
    Ok(match choice {
        TransportChoice::Copy if placed => Box::new(CopyTransport::placed(id_map)),
        TransportChoice::Copy => Box::new(CopyTransport::single_device()),
        TransportChoice::Nccl => {
            let t = NcclTransport::single_process(&map, &id_map, &distinct_groups(plan))?;
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
            Box::new(NcclTransport::from_world(w, &map, &distinct_groups(plan))?)
        }
    })
}

/// Per device (same index as the contexts): its resources, device kernels and largest pitch.
struct DeviceSetup {
    devs: Vec<DeviceRes>,
    dks: Vec<DeviceKernels>,
    max_pitch: Vec<usize>,
}

impl DeviceSetup {
    /// Loads the device kernels on every device, compiles the patches `need` names (the cuDNN
    /// patch when `opts.attention` asks for it; where the library is unavailable a warning,
    /// and the NVRTC kernel is compiled later, once a block needs it), and makes each device's
    /// allocation stream (device 0's is the hub).
    fn open(
        ctxs: &[Arc<CudaContext>],
        ids: &[usize],
        need: PatchUse,
        device_kernels_ptx: &str,
        opts: &ExecOptions,
        warnings: &mut Vec<String>,
    ) -> Result<DeviceSetup> {
        let mut out = DeviceSetup {
            devs: Vec::with_capacity(ctxs.len()),
            dks: Vec::with_capacity(ctxs.len()),
            max_pitch: Vec::with_capacity(ctxs.len()),
        };
        for (ctx, id) in ctxs.iter().zip(ids) {
            ctx.bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            out.dks.push(DeviceKernels::load(ctx, device_kernels_ptx)?);
            let gemm = if need.gemm {
                Some(GemmPatch::new(ctx, opts.gemm_workspace_bytes)?)
            } else {
                None
            };
            let cudnn = if need.attention && opts.attention == AttnBackend::Cudnn {
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
            out.max_pitch.push(
                ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_PITCH)
                    .map_err(RuntimeError::driver("max pitch"))?
                    .max(0) as usize,
            );
            out.devs.push(DeviceRes {
                id: *id,
                ctx: ctx.clone(),
                gemm,
                attention: None,
                attention_f32: None,
                cudnn,
                stream: ctx
                    .new_stream()
                    .map_err(RuntimeError::driver("create stream"))?,
            });
        }
        Ok(out)
    }
}

/// The plan's global buffers: allocated on the main device `main` through the `hub` stream
/// when `own` is set (outputs ready, inputs waiting for an upload), else unbound (a
/// placeholder at address 0 until [`CudaExecutor::bind_global`]).
fn alloc_globals(
    main: &Arc<CudaContext>,
    hub: &Arc<CudaStream>,
    plan: &Plan,
    own: bool,
) -> Result<Vec<GlobalMem>> {
    main.bind_to_thread()
        .map_err(RuntimeError::driver("bind context"))?;
    let mut globals = Vec::with_capacity(plan.buffers.len());
    for b in &plan.buffers {
        let bytes = b.shape.iter().product::<usize>() * b.dtype.size_bytes();
        let (buf, ptr) = if own {
            let (buf, ptr) = alloc(hub, bytes)?;
            (Some(buf), ptr)
        } else {
            (None, 0)
        };
        globals.push(GlobalMem {
            own: buf,
            pieces: vec![BoundRegion {
                region: Region::full(&b.shape),
                ptr,
                strides: row_major_strides(&b.shape),
            }],
            dtype: b.dtype,
            shape: b.shape.clone(),
            role: b.role,
            ready: own && b.role == Role::Output,
            poison: vec![b.role == Role::Output],
        });
    }
    Ok(globals)
}

/// Per rank: its slots (in `mem`), streams, events and scratch, on its device.
struct RankSetup {
    mem: MemTable,
    ranks: Vec<RankState>,
    transfer_streams: Vec<Arc<CudaStream>>,
    transfer_scratch: Vec<Scratch>,
}

impl RankSetup {
    /// Allocates every local rank's slots on its device (`devs[rank_dev[r]]`'s stream) and
    /// gives every rank a compute and a transfer stream, two events and scratch; a GEMM
    /// workspace where its device has the GEMM patch. Ranks of other processes get idle
    /// placeholder streams and no slots: their slots are listed with address 0, for shapes and
    /// types. Returns once the allocations have completed. The ranks' launches are filled in
    /// later ([`Resolved`]).
    #[allow(clippy::too_many_arguments)]
    fn alloc(
        plan: &Plan,
        ctxs: &[Arc<CudaContext>],
        devs: &[DeviceRes],
        ids: &[usize],
        rank_dev: &[usize],
        local: &[bool],
        placed: bool,
        opts: &ExecOptions,
    ) -> Result<RankSetup> {
        let nranks = plan.ranks.len();
        let mut out = RankSetup {
            mem: MemTable::default(),
            ranks: Vec::with_capacity(nranks),
            transfer_streams: Vec::with_capacity(nranks),
            transfer_scratch: Vec::with_capacity(nranks),
        };
        if placed {
            out.mem.devs = rank_dev.iter().map(|d| ids[*d]).collect();
            out.mem.remote = local.iter().map(|l| !l).collect();
        }
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
            out.mem.ranks.push(infos);
            let ws = match (&devs[d].gemm, local[ri]) {
                (Some(_), true) => Some(GemmWorkspace::new(&compute, opts.gemm_workspace_bytes)?),
                _ => None,
            };
            out.ranks.push(RankState {
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
                uses: Vec::new(),
                direct: Default::default(),
                skip_init: Vec::new(),
                skip_out: Vec::new(),
            });
            out.transfer_scratch.push(Scratch::new(transfer.clone()));
            out.transfer_streams.push(transfer);
        }
        for d in devs {
            d.stream
                .synchronize()
                .map_err(RuntimeError::driver("synchronize allocations"))?;
        }
        Ok(out)
    }
}

/// One local rank's launches, resolved against the real addresses: its slots'
/// initialisation, each stage's compute (attention blocks are chosen afterwards, by
/// `choose_attention`) and its output pieces.
struct Resolved {
    init: Vec<InitLaunch>,
    stages: Vec<Vec<ComputeLaunch>>,
    outputs: Vec<(Loc, Loc)>,
    uses: Vec<GlobalUse>,
}

impl Resolved {
    /// Resolves rank `ri`'s plan `r`. `main_dev` is where the global buffers' locations live
    /// as copies see them (`None`: unplaced). Errors: a view or type an operation cannot take,
    /// a generated kernel missing from the device kernels' PTX, a slot initialised from an
    /// output buffer, an output piece written into an input buffer.
    #[allow(clippy::too_many_arguments)]
    fn of(
        r: &mercury_plan::RankProgram,
        ri: usize,
        mem: &MemTable,
        globals: &[GlobalMem],
        dks: &[DeviceKernels],
        main_dev: Option<usize>,
        opts: &ExecOptions,
    ) -> Result<Resolved> {
        let mut init = Vec::with_capacity(r.slots.len());
        let mut uses = Vec::new();
        for (si, s) in r.slots.iter().enumerate() {
            let info = &mem.ranks[ri][si];
            let full = Region::full(&s.shape);
            let here = mem.devs.get(ri).copied();
            init.push(match &s.init {
                SlotInit::Uninit if opts.poison_uninit => InitLaunch::Poison,
                SlotInit::Uninit => InitLaunch::Nothing,
                SlotInit::Zero | SlotInit::MaskedZero => InitLaunch::Zero,
                SlotInit::NegInf | SlotInit::MaskedNegInf => {
                    mem::neg_inf_pattern(s.dtype)?;
                    InitLaunch::NegInf(Loc::of(info.ptr, s.dtype, &s.shape, &full)?)
                }
                SlotInit::FromGlobal { buffer, region } => {
                    let g = input_global(globals, *buffer, &s.name, ri)?;
                    let (src, piece) = global_loc(g, *buffer, region)?;
                    let src = src.on(main_dev);
                    let dst = Loc::of(info.ptr, s.dtype, &s.shape, &full)?.on(here);
                    check_copy(&src, &dst)?;
                    uses.push(GlobalUse {
                        buffer: *buffer,
                        region: region.clone(),
                        at: UseAt::Init(si, None),
                        piece,
                    });
                    InitLaunch::Copy { src, dst }
                }
                SlotInit::FromGlobalPieces { buffer, pieces } => {
                    let g = input_global(globals, *buffer, &s.name, ri)?;
                    let mut copies = Vec::with_capacity(pieces.len());
                    for (pi, p) in pieces.iter().enumerate() {
                        let (src, piece) = global_loc(g, *buffer, &p.region)?;
                        let src = src.on(main_dev);
                        let dst = Loc::of(info.ptr, s.dtype, &s.shape, &p.at)?.on(here);
                        check_copy(&src, &dst)?;
                        uses.push(GlobalUse {
                            buffer: *buffer,
                            region: p.region.clone(),
                            at: UseAt::Init(si, Some(pi)),
                            piece,
                        });
                        copies.push((src, dst));
                    }
                    InitLaunch::Copies(copies)
                }
            });
        }
        let mut stages = Vec::with_capacity(r.stages.len());
        for st in &r.stages {
            let mut ops_here = Vec::with_capacity(st.compute.len());
            for op in &st.compute {
                let launch = ops::resolve(mem, ri, op)?;
                // A generated kernel missing from the PTX is an error now, not mid-run.
                if let ComputeLaunch::Tile(t) = &launch {
                    for dk in dks {
                        dk.tile_function(&t.name)?;
                    }
                }
                ops_here.push(launch);
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
            let (dst, piece) = global_loc(g, o.buffer, &o.region)?;
            let dst = dst.on(main_dev);
            check_copy(&src, &dst)?;
            uses.push(GlobalUse {
                buffer: o.buffer,
                region: o.region.clone(),
                at: UseAt::Output(outputs.len()),
                piece,
            });
            outputs.push((src, dst));
        }
        Ok(Resolved {
            init,
            stages,
            outputs,
            uses,
        })
    }
}

/// The progress marks of a run and where each is recorded, as (phase, stream): each local
/// rank's compute stream after the initialisation (phase 0) and after the output gather
/// (phase `stages + 1`), and every stream with work after each stage (`peer[si].record`,
/// phase `si + 1`). Stream y belongs to rank y % `nranks` (compute r, transfer nranks + r);
/// its mark is made on that rank's device.
fn progress_marks(
    peer: &[StageWaits],
    local_ranks: &[usize],
    ctxs: &[Arc<CudaContext>],
    rank_dev: &[usize],
    nranks: usize,
    stages: usize,
) -> Result<(Vec<CudaEvent>, Vec<(usize, usize)>)> {
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
        marks.push(new_event(&ctxs[rank_dev[y % nranks]], false)?);
    }
    Ok((marks, mark_at))
}

/// How fault reports name each rank: `rank 1 (GPU 1)` for this process's ranks (`gpu_of`
/// gives the CUDA ordinal), `rank 5 (process 1)` for another process's under a launcher of
/// `world_size` processes (ranks split evenly), else `rank 5`.
fn rank_labels(
    nranks: usize,
    local: &[bool],
    world_size: Option<usize>,
    gpu_of: impl Fn(usize) -> usize,
) -> Vec<String> {
    (0..nranks)
        .map(|r| match world_size {
            Some(p) if !local[r] && p > 0 => {
                format!("rank {r} (process {})", r / (nranks / p).max(1))
            }
            _ if !local[r] => format!("rank {r}"),
            _ => format!("rank {r} (GPU {})", gpu_of(r)),
        })
        .collect()
}

/// Validates `opts.fault` against the plan (`nranks`, `stages`) and, for an injected hang on a
/// rank of this process, allocates the device word (256 zeroed bytes on that rank's device)
/// the hang waits on to become 1.
#[allow(clippy::too_many_arguments)]
fn hang_word(
    opts: &ExecOptions,
    nranks: usize,
    stages: usize,
    local: &[bool],
    ctxs: &[Arc<CudaContext>],
    devs: &[DeviceRes],
    rank_dev: &[usize],
) -> Result<Option<(DeviceBuffer, u64)>> {
    let Some(f) = &opts.fault else {
        return Ok(None);
    };
    f.validate(nranks, stages)
        .map_err(RuntimeError::Unsupported)?;
    if f.kind != FaultKind::Hang || !local[f.rank] {
        return Ok(None);
    }
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
    Ok(Some((buf, ptr)))
}

/// The global input buffer `buffer` that slot `slot` of rank `rank` is initialised from.
fn input_global<'g>(
    globals: &'g [GlobalMem],
    buffer: usize,
    slot: &str,
    rank: usize,
) -> Result<&'g GlobalMem> {
    let g = globals
        .get(buffer)
        .ok_or_else(|| RuntimeError::Io(format!("slot '{slot}' reads buffer #{buffer}")))?;
    if g.role != Role::Input {
        return Err(RuntimeError::Io(format!(
            "slot '{slot}' of rank {rank} is initialised from output buffer #{buffer}"
        )));
    }
    Ok(g)
}
