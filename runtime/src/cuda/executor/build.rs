//! Construction: contexts and patches per device, slots and streams per rank, the transport,
//! and the resolution of every operation against the real addresses (so unsupported views
//! and types fail before anything runs); the progress marks and fault bookkeeping.

use super::attention::{choose_attention, cudnn_patch};
use super::peers::enable_peer_access;
use super::{
    alloc, new_event, AttnBackend, CudaExecutor, DeviceRes, ExecOptions, GlobalMem, InitLaunch,
    Placement, RankState, TransportChoice,
};
use crate::cuda::device_kernels::DeviceKernels;
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::fault::{FaultKind, MarkTracker, Who};
use crate::cuda::mem::{self, Loc, MemTable, Peers, Scratch, SlotInfo};
use crate::cuda::nccl::NcclTransport;
use crate::cuda::ops::{self, check_copy, ComputeLaunch};
use crate::cuda::placement::{distinct_groups, DeviceMap};
use crate::cuda::schedule;
use crate::cuda::transport::{CopyTransport, Transport, Work};
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use mercury_kernels::cuda::{GemmPatch, GemmWorkspace};
use mercury_plan::{ComputeOp, PatchKind, Plan, Region, Role, SlotInit};
use std::sync::Arc;

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
        // A tile matmul runs on the GEMM patch too.
        let tile_matmul = plan.ranks.iter().any(|r| {
            r.stages.iter().any(|s| {
                s.compute.iter().any(|op| {
                    matches!(
                        op,
                        ComputeOp::Tile {
                            tile: mercury_plan::TileOp::Matmul { .. },
                            ..
                        }
                    )
                })
            })
        });
        let uses_gemm = tile_matmul || uses(&|p| matches!(p, PatchKind::Gemm { .. }));
        let ids: Vec<usize> = dev_ctxs.iter().map(|(i, _)| *i).collect();
        let ctxs: Vec<Arc<CudaContext>> = dev_ctxs.into_iter().map(|(_, c)| c).collect();
        let uses_attention = uses(&|p| matches!(p, PatchKind::Attention { .. }));

        let mut warnings = Vec::new();
        // Each rank's device id and CUDA ordinal.
        let id_map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ids[*d]).collect());
        let map = DeviceMap::from_ordinals(rank_dev.iter().map(|d| ctxs[*d].ordinal()).collect());
        let world_size = match &choice {
            TransportChoice::NcclWorld(w) => Some(w.env().world_size),
            _ => None,
        };
        // The transport first: under a launcher its communicator splits are collective, and
        // only the deterministic checks above come before them, so every process reaches them
        // or fails alike (no local failure before them can leave another process waiting in a
        // split). Then the plan-level refusals, the same in every process.
        ctxs[0]
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
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
        for st in &schedule.stages {
            for c in &st.collectives {
                transport.check_plan_collective(c)?;
            }
        }

        // Per device: kernels, patches, an allocation stream (the hub on the main device).
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

        for w in &warnings {
            tracing::warn!("{w}");
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
                init.push(match &s.init {
                    SlotInit::Uninit if opts.poison_uninit => InitLaunch::Poison,
                    SlotInit::Uninit => InitLaunch::Nothing,
                    SlotInit::Zero => InitLaunch::Zero,
                    SlotInit::NegInf => {
                        mem::neg_inf_pattern(s.dtype)?;
                        InitLaunch::NegInf(Loc::of(info.ptr, s.dtype, &s.shape, &full)?)
                    }
                    SlotInit::FromGlobal { buffer, region } => {
                        let g = input_global(&globals, *buffer, &s.name, ri)?;
                        let src = Loc::of(g.ptr, g.dtype, &g.shape, region)?.on(main_dev);
                        let dst = Loc::of(info.ptr, s.dtype, &s.shape, &full)?.on(here);
                        check_copy(&src, &dst)?;
                        InitLaunch::Copy { src, dst }
                    }
                    SlotInit::FromGlobalPieces { buffer, pieces } => {
                        let g = input_global(&globals, *buffer, &s.name, ri)?;
                        let mut copies = Vec::with_capacity(pieces.len());
                        for p in pieces {
                            let src = Loc::of(g.ptr, g.dtype, &g.shape, &p.region)?.on(main_dev);
                            let dst = Loc::of(info.ptr, s.dtype, &s.shape, &p.at)?.on(here);
                            check_copy(&src, &dst)?;
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
                    let launch = ops::resolve(&mem, ri, op)?;
                    // A generated kernel missing from the PTX is an error now, not mid-run.
                    if let ComputeLaunch::Tile(t) = &launch {
                        for dk in &dks {
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
                let dst = Loc::of(g.ptr, g.dtype, &g.shape, &o.region)?.on(main_dev);
                check_copy(&src, &dst)?;
                outputs.push((src, dst));
            }
            // Attention: the cuDNN patch where it takes the block, else the NVRTC kernel.
            let parts = choose_attention(
                &mut devs[rank_dev[ri]],
                &plan.ranks[ri],
                &mut stages,
                &opts,
                &mut warnings,
            )?;
            ranks[ri]._parts.extend(parts);
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
