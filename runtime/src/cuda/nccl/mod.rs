//! NCCL: library probing and version, the process environment NCCL must see, communicator
//! handles, and [`NcclTransport`] (collectives and Send/Recv as NCCL kernels on every rank's
//! transfer stream).
//!
//! **NVLink multicast stays off.** [`prepare_env`] sets `NCCL_NVLS_ENABLE=0` (and
//! `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`, `NVSHMEM_DISABLE_NVLS=1`) in this process before NCCL's
//! first use, overriding a different value with a warning: on the shared multi-GPU machines a
//! program using multicast can take the host's GPUs out of service. Every entry point of this
//! module that calls NCCL calls it first. The workspace is edition 2021, where
//! `std::env::set_var` is a safe function; it is still only sound while no other thread reads
//! the environment, so call [`prepare_env`] early (mercury-run does, before opening devices).
//!
//! Communicators (one process, several GPUs): one per distinct collective group of the plan
//! whose members sit on distinct devices (`ncclCommInitAll` over the group's devices in group
//! order, so NCCL rank = position in the group), plus a world communicator over all ranks for
//! Send/Recv when every rank has its own device. Groups or messages whose ranks share a device
//! (NCCL allows one rank per device and communicator) fall back to the copy transport. With a
//! launcher (one process per GPU or node), `launcher::World` builds the world communicator and
//! splits it per group (`ncclCommSplit`), and messages to ranks of other processes are NCCL
//! Send/Recv. When a process's ranks share one GPU the world is a *bridge* (one NCCL rank per
//! process, `launcher` module docs): messages to other processes' ranks are Send/Recv to the
//! peer process in plan order; groups with one member per process are split from the bridge;
//! groups inside one process use device copies; *mixed* groups (several members in one
//! process, others elsewhere) are carried out as messages when the collective is a data
//! movement (all-gather, all-to-all, broadcast: [`decompose`], in one order every process
//! shares) and refused when it reduces.
//!
//! A stage runs in three phases: operands are packed into contiguous scratch where needed
//! (and reductions with an f32 side widened to f32) on each rank's transfer stream; all NCCL calls of the
//! stage are issued between one `ncclGroupStart`/`ncclGroupEnd`; results are unpacked (and
//! the log-sum-exp all-reduce merged in group order) afterwards. NCCL launches a group's
//! kernels at `ncclGroupEnd`, so nothing that consumes a result may be enqueued before it.

use super::error::{Result, RuntimeError};
use super::launcher::{World, WorldParts};
use super::mem::{copy, Loc, MemTable};
use super::ops::{enqueue_lse_merge, lse_shape};
use super::placement::{group_span, process_of, DeviceMap, GroupSpan};
use super::schedule::{chunk_view, CollectiveCall, Message, StageTransfers};
use super::transport::{reduce_members, CopyTransport, TransferCx, Transport, Work};
use cudarc::nccl::sys as ns;
use mercury_plan::{Collective, CombineKind, DType, View};
use std::collections::HashMap;

mod comm;

use comm::check;
pub use comm::{nccl_err, prepare_env, probe, result_text, version, Comm, NCCL_ENV};

/// NCCL data type of a plan dtype.
fn nccl_type(d: DType) -> ns::ncclDataType_t {
    match d {
        DType::F32 => ns::ncclDataType_t::ncclFloat32,
        DType::F64 => ns::ncclDataType_t::ncclFloat64,
        DType::F16 => ns::ncclDataType_t::ncclFloat16,
        DType::BF16 => ns::ncclDataType_t::ncclBfloat16,
    }
}

/// One NCCL call of a stage, with raw handles (issued between group start and end).
enum Call {
    Send {
        buf: u64,
        bytes: usize,
        peer: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    Recv {
        buf: u64,
        bytes: usize,
        peer: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    AllReduce {
        buf: u64,
        count: usize,
        dtype: DType,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    AllGather {
        send: u64,
        recv: u64,
        bytes: usize,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    Broadcast {
        send: u64,
        recv: u64,
        bytes: usize,
        root: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    /// `ncclReduce` (sum) into NCCL rank `root`; `recv` is 0 on every other member (NCCL
    /// reads it on the root only).
    Reduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        root: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
}

/// Work after the group: on `rank`'s transfer stream.
enum Post {
    Copy {
        rank: usize,
        src: Loc,
        dst: Loc,
    },
    /// Merge `n` gathered `[o | lse]` parts (f32, `rows * d + rows` each) in group order into
    /// `o` and `lse`.
    LseMerge {
        rank: usize,
        base: u64,
        n: usize,
        rows: usize,
        d: usize,
        o: Loc,
        lse: Loc,
    },
}

/// Collectives and messages through NCCL (see the module docs).
pub struct NcclTransport {
    map: DeviceMap,
    local: Vec<bool>,
    /// World communicator handle of each local rank (NCCL rank = plan rank).
    world: HashMap<usize, Comm>,
    /// Per group (as the plan writes it): the handle of each local member.
    groups: HashMap<Vec<usize>, HashMap<usize, Comm>>,
    fallback: CopyTransport,
    /// Groups left to the copy transport (members sharing a device).
    fallback_groups: Vec<Vec<usize>>,
    multi_process: bool,
    /// The process's bridge handle (NCCL rank = process rank) when its ranks share a GPU.
    bridge: Option<Comm>,
    /// Plan ranks per process (`placement::process_of`).
    per_process: usize,
}

impl NcclTransport {
    /// One process drives every rank: a communicator per group whose members sit on distinct
    /// GPUs, a world communicator when every rank has its own GPU. `map` gives each rank's
    /// CUDA ordinal, `ids` the device ids its memory carries (the same map unless device ids
    /// alias GPUs; copies fall back on it).
    pub fn single_process(
        map: &DeviceMap,
        ids: &DeviceMap,
        groups: &[Vec<usize>],
    ) -> Result<NcclTransport> {
        let all: Vec<usize> = (0..map.ranks()).collect();
        let mut world = HashMap::new();
        if map.ranks() > 1 && map.distinct_devices(&all) {
            for (r, c) in Comm::init_all(map.as_slice())?.into_iter().enumerate() {
                world.insert(r, c);
            }
        }
        let mut by_group = HashMap::new();
        let mut fallback_groups = Vec::new();
        for g in groups {
            if !map.distinct_devices(g) {
                fallback_groups.push(g.clone());
                continue;
            }
            let ordinals: Vec<usize> = g.iter().map(|r| map.device(*r)).collect();
            let comms = Comm::init_all(&ordinals)?;
            by_group.insert(g.clone(), g.iter().copied().zip(comms).collect());
        }
        Ok(NcclTransport {
            map: map.clone(),
            local: vec![true; map.ranks()],
            world,
            groups: by_group,
            fallback: CopyTransport::placed(ids.clone()),
            fallback_groups,
            multi_process: false,
            bridge: None,
            per_process: map.ranks().max(1),
        })
    }

    /// A launcher started one process per GPU or node: `world` holds this process's ranks'
    /// world communicators; every group of the plan (`groups`, identical in every process) is
    /// split from it.
    pub fn from_world(
        world: World,
        map: &DeviceMap,
        groups: &[Vec<usize>],
    ) -> Result<NcclTransport> {
        let by_group = world.split(groups)?;
        let local_ranks = world.local_ranks();
        let mut local = vec![false; map.ranks()];
        for r in local_ranks {
            local[r] = true;
        }
        let WorldParts {
            per_rank,
            bridge,
            per_process,
        } = world.into_parts();
        Ok(NcclTransport {
            map: map.clone(),
            local,
            world: per_rank,
            groups: by_group,
            fallback: CopyTransport::placed(map.clone()),
            fallback_groups: Vec::new(),
            multi_process: true,
            bridge,
            per_process,
        })
    }

    /// Groups carried by the copy transport instead (their members share a device).
    pub fn fallback_groups(&self) -> &[Vec<usize>] {
        &self.fallback_groups
    }

    /// Number of group communicators this process holds a handle of.
    pub fn communicators(&self) -> usize {
        self.groups.len() + usize::from(!self.world.is_empty() || self.bridge.is_some())
    }

    fn is_local(&self, r: usize) -> bool {
        self.local[r]
    }

    /// Whether this process drives an end of `msg` (else the message is not its business).
    fn involved(&self, msg: &Message) -> bool {
        self.is_local(msg.src_rank) || self.is_local(msg.dst_rank)
    }

    /// Whether this process drives a member of `call`.
    fn member(&self, call: &CollectiveCall) -> bool {
        call.group.iter().any(|r| self.is_local(*r))
    }

    /// A collective of a mixed group (`GroupSpan::Mixed`: no communicator) under the bridge:
    /// it runs as messages ([`decompose`]).
    fn mixed_group(&self, call: &CollectiveCall) -> bool {
        self.bridge.is_some() && group_span(&call.group, self.per_process) == GroupSpan::Mixed
    }

    /// A mixed collective this process takes part in.
    fn mixed(&self, call: &CollectiveCall) -> bool {
        self.mixed_group(call) && self.member(call)
    }

    /// The communicator handle and NCCL peer for local rank `here` talking to rank `other`:
    /// the world (peer = `other`), or the bridge (peer = `other`'s process).
    fn p2p(&self, here: usize, other: usize) -> Result<(ns::ncclComm_t, i32)> {
        match &self.bridge {
            Some(b) => Ok((b.raw(), process_of(other, self.per_process) as i32)),
            None => Ok((self.world_comm(here)?.raw(), other as i32)),
        }
    }

    /// The stage's messages this process takes part in, in plan order, followed by the
    /// messages of its mixed collectives (in collective order, each in [`decompose`]'s order):
    /// every process derives the same sequence, so NCCL pairs the bridge's sends and receives
    /// right.
    ///
    /// Also returns the fan-out copies of the mixed collectives whose first receiver is local
    /// (run on that receiver's stream after the messages landed).
    fn stage_messages(&self, st: &StageTransfers) -> Result<(Vec<Message>, Vec<Message>)> {
        let mut out: Vec<Message> = st
            .messages
            .iter()
            .filter(|m| self.involved(m))
            .cloned()
            .collect();
        let mut fan_out = Vec::new();
        for c in st.collectives.iter().filter(|c| self.mixed(c)) {
            let d = decompose(c, self.per_process)?;
            out.extend(d.messages.into_iter().filter(|m| self.involved(m)));
            fan_out.extend(d.fan_out.into_iter().filter(|m| self.is_local(m.src_rank)));
        }
        Ok((out, fan_out))
    }

    /// Whether `msg` goes through NCCL (else a copy within this process).
    fn nccl_message(&self, msg: &Message) -> bool {
        let both_local = self.is_local(msg.src_rank) && self.is_local(msg.dst_rank);
        !(both_local
            && (msg.src_rank == msg.dst_rank
                || self.map.same_device(msg.src_rank, msg.dst_rank)
                || self.world.is_empty()))
    }

    fn nccl_collective(&self, call: &CollectiveCall) -> bool {
        self.groups.contains_key(&call.group)
    }

    fn world_comm(&self, rank: usize) -> Result<&Comm> {
        self.world.get(&rank).ok_or_else(|| {
            RuntimeError::Unsupported(format!(
                "no NCCL world communicator for rank {rank} (messages between GPUs with NCCL need every rank on its own device)"
            ))
        })
    }

    fn group_comm(&self, group: &[usize], rank: usize) -> Result<&Comm> {
        self.groups
            .get(group)
            .and_then(|m| m.get(&rank))
            .ok_or_else(|| {
                RuntimeError::Schedule(format!(
                    "no NCCL communicator of rank {rank} for group {group:?}"
                ))
            })
    }
}

fn raw_stream(cx: &TransferCx<'_>, rank: usize) -> ns::cudaStream_t {
    cx.streams[rank].cu_stream() as ns::cudaStream_t
}

/// Contiguous send memory for `loc` on `rank`'s transfer stream: its own address or a packed
/// scratch copy (converted to `as_type`).
///
/// # Safety
/// `loc` must be live memory of `rank`.
unsafe fn packed(cx: &mut TransferCx<'_>, rank: usize, loc: &Loc, as_type: DType) -> Result<u64> {
    let mut c = cx.copy_cx(rank)?;
    if let (Some(p), true, true) = (
        loc.contiguous_ptr(),
        loc.is_on(c.here()),
        loc.dtype == as_type,
    ) {
        return Ok(p);
    }
    let n = loc.reg.numel();
    let t = c.scratch.take(n * as_type.size_bytes())?;
    // SAFETY: per the caller; `t` holds n elements of `as_type`.
    unsafe { copy(&mut c, loc, &Loc::dense(t, as_type, n))? };
    Ok(t)
}

/// Contiguous receive memory for `loc` on `rank` in `as_type`: its own address when usable
/// directly, else scratch with a [`Post::Copy`] into `loc`.
fn landing(
    cx: &mut TransferCx<'_>,
    rank: usize,
    loc: &Loc,
    as_type: DType,
    posts: &mut Vec<Post>,
) -> Result<u64> {
    let here = cx.here(rank);
    if let (Some(p), true, true) = (loc.contiguous_ptr(), loc.is_on(here), loc.dtype == as_type) {
        return Ok(p);
    }
    let n = loc.reg.numel();
    let t = cx.scratch[rank].take(n * as_type.size_bytes())?;
    posts.push(Post::Copy {
        rank,
        src: Loc::dense(t, as_type, n),
        dst: loc.clone(),
    });
    Ok(t)
}

/// Element type a sum from `src` into `dst` runs in: bf16 when both are bf16 (partial sums go
/// over the wire as bf16 and NCCL sums them in bf16, as NCCL + cuBLAS does: with two members
/// one addition rounded once, the copy transport's bits; with more, NCCL rounds at each step
/// of its ring), else f32 (a bf16 side is widened).
///
/// # Errors
/// [`RuntimeError::Unsupported`] for other element types.
fn reduce_type(src: DType, dst: DType) -> Result<DType> {
    for d in [src, dst] {
        if !matches!(d, DType::F32 | DType::BF16) {
            return Err(RuntimeError::Unsupported(format!(
                "NCCL reduction of {} buffers (f32 and bf16 only)",
                d.name()
            )));
        }
    }
    Ok(if (src, dst) == (DType::BF16, DType::BF16) {
        DType::BF16
    } else {
        DType::F32
    })
}

impl NcclTransport {
    /// Phase A of one NCCL message: pack and describe the calls.
    ///
    /// # Safety
    /// As [`Transport::message`]: the message's views are live memory of the executor and the
    /// stage's dependencies are already enqueued on the streams used.
    unsafe fn plan_message(
        &self,
        cx: &mut TransferCx<'_>,
        msg: &Message,
        calls: &mut Vec<Call>,
        posts: &mut Vec<Post>,
    ) -> Result<()> {
        let smeta = cx.mem.meta(msg.src_rank, &msg.src)?;
        let bytes = smeta.bytes();
        if self.is_local(msg.src_rank) {
            let (comm, peer) = self.p2p(msg.src_rank, msg.dst_rank)?;
            let s = cx.mem.loc(msg.src_rank, &msg.src)?;
            // SAFETY: live memory of the sending rank.
            let buf = unsafe { packed(cx, msg.src_rank, &s, s.dtype)? };
            calls.push(Call::Send {
                buf,
                bytes,
                peer,
                comm,
                stream: raw_stream(cx, msg.src_rank),
            });
        }
        if self.is_local(msg.dst_rank) {
            let (comm, peer) = self.p2p(msg.dst_rank, msg.src_rank)?;
            let d = cx.mem.loc(msg.dst_rank, &msg.dst)?;
            // Received in the sender's type, converted by the unpacking copy.
            let buf = landing(cx, msg.dst_rank, &d, smeta.dtype, posts)?;
            calls.push(Call::Recv {
                buf,
                bytes,
                peer,
                comm,
                stream: raw_stream(cx, msg.dst_rank),
            });
        }
        Ok(())
    }

    /// Phase A of one NCCL collective, for each local member (one function per kind below).
    ///
    /// # Safety
    /// As [`Transport::collective`].
    unsafe fn plan_collective(
        &self,
        cx: &mut TransferCx<'_>,
        call: &CollectiveCall,
        calls: &mut Vec<Call>,
        posts: &mut Vec<Post>,
    ) -> Result<()> {
        for (p, &r) in call.group.iter().enumerate() {
            if !self.is_local(r) {
                continue;
            }
            let m = Member {
                call,
                p,
                r,
                comm: self.group_comm(&call.group, r)?.raw(),
                stream: raw_stream(cx, r),
            };
            // SAFETY: per this function's contract; `r` is local.
            unsafe {
                match &call.members[p] {
                    Collective::AllReduce {
                        bufs,
                        kind: CombineKind::Add,
                    } => all_reduce_add(cx, &m, bufs, calls, posts)?,
                    Collective::AllReduce {
                        bufs,
                        kind: CombineKind::LseMerge,
                    } => all_reduce_lse_merge(cx, &m, bufs, calls, posts)?,
                    Collective::AllGather { src, dst, axis } => {
                        all_gather(cx, &m, src, dst, axis, calls, posts)?
                    }
                    Collective::ReduceScatter {
                        src,
                        dst,
                        axis,
                        kind,
                    } => reduce_scatter(cx, &m, src, dst, axis, kind, calls, posts)?,
                    Collective::AllToAll {
                        src,
                        dst,
                        split_axis,
                        concat_axis,
                    } => all_to_all(cx, &m, src, dst, split_axis, concat_axis, calls, posts)?,
                    Collective::Reduce { src, dst, root, .. } => {
                        reduce(cx, &m, src, dst, root, calls, posts)?
                    }
                    Collective::Broadcast { buf, root } => {
                        broadcast(cx, &m, buf, root, calls, posts)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// One local member of a collective in phase A: the call, the member's position `p` in the
/// group, its plan rank `r`, its communicator handle and its transfer stream.
#[derive(Clone, Copy)]
struct Member<'c> {
    call: &'c CollectiveCall,
    p: usize,
    r: usize,
    comm: ns::ncclComm_t,
    stream: ns::cudaStream_t,
}

/// Phase A of `AllReduce` (sum) in place: each buffer packed in the reduction's type where it is
/// not usable directly, and copied back after the group.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn all_reduce_add(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    bufs: &[View],
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        r, comm, stream, ..
    } = *m;
    let mem = cx.mem;
    for b in bufs {
        let l = mem.loc(r, b)?;
        let t = reduce_type(l.dtype, l.dtype)?;
        // SAFETY: live memory of rank r.
        let buf = unsafe { packed(cx, r, &l, t)? };
        if l.contiguous_ptr() != Some(buf) {
            posts.push(Post::Copy {
                rank: r,
                src: Loc::dense(buf, t, l.reg.numel()),
                dst: l.clone(),
            });
        }
        calls.push(Call::AllReduce {
            buf,
            count: l.reg.numel(),
            dtype: t,
            comm,
            stream,
        });
    }
    Ok(())
}

/// Phase A of `AllReduce` (lse merge) of an `[o, lse]` pair: every member's `[o | lse]` (f32) is
/// all-gathered into scratch, then merged in group order into `o` and `lse` after the group.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn all_reduce_lse_merge(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    bufs: &[View],
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        r,
        comm,
        stream,
        ..
    } = *m;
    let n = call.group.len();
    let mem = cx.mem;
    let (o, l) = (mem.loc(r, &bufs[0])?, mem.loc(r, &bufs[1])?);
    let (rows, d) = lse_shape(&o, &l, &o, &l)?;
    let part = rows * d + rows;
    let mut c = cx.copy_cx(r)?;
    let send = c.scratch.take(part * 4)?;
    let recv = c.scratch.take(n * part * 4)?;
    // SAFETY: `send` holds [o | lse] of this member.
    unsafe {
        copy(&mut c, &o, &Loc::dense(send, DType::F32, rows * d))?;
        copy(
            &mut c,
            &l,
            &Loc::dense(send + (rows * d * 4) as u64, DType::F32, rows),
        )?;
    }
    calls.push(Call::AllGather {
        send,
        recv,
        bytes: part * 4,
        comm,
        stream,
    });
    posts.push(Post::LseMerge {
        rank: r,
        base: recv,
        n,
        rows,
        d,
        o,
        lse: l,
    });
    Ok(())
}

/// Phase A of `AllGather` of `src` into `dst` along `axis`: gathered into scratch, each member's
/// chunk copied into its place after the group.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn all_gather(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    src: &View,
    dst: &View,
    axis: &usize,
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        r,
        comm,
        stream,
        ..
    } = *m;
    let n = call.group.len();
    let mem = cx.mem;
    let s = mem.loc(r, src)?;
    // SAFETY: live memory of rank r.
    let send = unsafe { packed(cx, r, &s, s.dtype)? };
    let chunk = s.bytes();
    let recv = cx.scratch[r].take(n * chunk)?;
    for q in 0..n {
        posts.push(Post::Copy {
            rank: r,
            src: Loc::dense(recv + (q * chunk) as u64, s.dtype, s.reg.numel()),
            dst: mem.loc(r, &chunk_view(dst, *axis, n, q)?)?,
        });
    }
    calls.push(Call::AllGather {
        send,
        recv,
        bytes: chunk,
        comm,
        stream,
    });
    Ok(())
}

/// Phase A of `ReduceScatter` (sum; an lse merge is refused) of `src` into this member's chunk
/// `dst` along `axis`: the source is the send buffer when its chunks are its memory in order, else
/// it is packed chunk by chunk in the reduction's type.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_scatter(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    src: &View,
    dst: &View,
    axis: &usize,
    kind: &CombineKind,
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        r,
        comm,
        stream,
        ..
    } = *m;
    let n = call.group.len();
    let mem = cx.mem;
    if *kind != CombineKind::Add {
        return Err(RuntimeError::Unsupported(
            "reduce-scatter with lse merge".into(),
        ));
    }
    let d = mem.loc(r, dst)?;
    let c_el = d.reg.numel();
    let s = mem.loc(r, src)?;
    let dtype = reduce_type(s.dtype, d.dtype)?;
    let es = dtype.size_bytes();
    // The source is the send buffer when its chunks are its memory in order.
    let in_order = s.dtype == dtype
        && s.is_on(cx.here(r))
        && src.region.extent[..*axis].iter().all(|e| *e == 1);
    let send = match s.contiguous_ptr().filter(|_| in_order) {
        Some(p) => p,
        None => {
            let mut c = cx.copy_cx(r)?;
            let send = c.scratch.take(n * c_el * es)?;
            for q in 0..n {
                let sq = mem.loc(r, &chunk_view(src, *axis, n, q)?)?;
                // SAFETY: chunk q of the source, into its place in the send
                // buffer (converted to the reduction's type).
                unsafe {
                    copy(
                        &mut c,
                        &sq,
                        &Loc::dense(send + (q * c_el * es) as u64, dtype, c_el),
                    )?
                };
            }
            send
        }
    };
    let recv = landing(cx, r, &d, dtype, posts)?;
    calls.push(Call::ReduceScatter {
        send,
        recv,
        count: c_el,
        dtype,
        comm,
        stream,
    });
    Ok(())
}

/// Phase A of `AllToAll` as grouped point-to-point calls: chunk q of `src` along `split_axis` to
/// member q, chunk q of `dst` along `concat_axis` from member q (received in member q's source
/// type).
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn all_to_all(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    src: &View,
    dst: &View,
    split_axis: &usize,
    concat_axis: &usize,
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        r,
        comm,
        stream,
        ..
    } = *m;
    let n = call.group.len();
    let mem = cx.mem;
    // Grouped point-to-point: chunk q of src to member q, chunk p of dst from p.
    for q in 0..n {
        let s = mem.loc(r, &chunk_view(src, *split_axis, n, q)?)?;
        // SAFETY: chunk q of this member's source.
        let buf = unsafe { packed(cx, r, &s, s.dtype)? };
        calls.push(Call::Send {
            buf,
            bytes: s.bytes(),
            peer: q as i32,
            comm,
            stream,
        });
    }
    for q in 0..n {
        let d = mem.loc(r, &chunk_view(dst, *concat_axis, n, q)?)?;
        // The sender's chunk type: member q's source type.
        let Collective::AllToAll { src: qs, .. } = &call.members[q] else {
            return Err(RuntimeError::Schedule("all-to-all members disagree".into()));
        };
        let st = mem.meta(call.group[q], qs)?.dtype;
        let buf = landing(cx, r, &d, st, posts)?;
        calls.push(Call::Recv {
            buf,
            bytes: d.reg.numel() * st.size_bytes(),
            peer: q as i32,
            comm,
            stream,
        });
    }
    Ok(())
}

/// Phase A of `Reduce` (sum) to member `root`: one element type on every member (NCCL needs it),
/// bf16 when every source and the root's destination are bf16, else f32.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    src: &View,
    dst: &Option<View>,
    root: &usize,
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        p,
        r,
        comm,
        stream,
    } = *m;
    let mem = cx.mem;
    // One element type on every member (NCCL needs it): bf16 when every
    // source and the root's destination are bf16, else f32 (an lse merge is
    // refused here).
    let (parts, out) = reduce_members(call, |q, v| mem.meta(q, v))?;
    let dtype = parts
        .iter()
        .try_fold(reduce_type(out.dtype, out.dtype)?, |t, x| {
            reduce_type(x.dtype, t)
        })?;
    let s = mem.loc(r, src)?;
    // SAFETY: live memory of rank r.
    let send = unsafe { packed(cx, r, &s, dtype)? };
    // `reduce_members` found the root's destination; the others name none
    // (the plan verifier and `schedule::build` check both).
    let recv = match dst {
        Some(d) if p == *root => landing(cx, r, &mem.loc(r, d)?, dtype, posts)?,
        _ => 0,
    };
    calls.push(Call::Reduce {
        send,
        recv,
        count: s.reg.numel(),
        dtype,
        root: *root as i32,
        comm,
        stream,
    });
    Ok(())
}

/// Phase A of `Broadcast` of `buf` from member `root`, in the root's element type.
///
/// # Safety
/// As [`Transport::collective`]: `m`'s rank is local and its views are live memory.
#[allow(clippy::too_many_arguments)]
unsafe fn broadcast(
    cx: &mut TransferCx<'_>,
    m: &Member<'_>,
    buf: &View,
    root: &usize,
    calls: &mut Vec<Call>,
    posts: &mut Vec<Post>,
) -> Result<()> {
    let Member {
        call,
        p,
        r,
        comm,
        stream,
    } = *m;
    let mem = cx.mem;
    let l = mem.loc(r, buf)?;
    let rootmeta = mem.meta(call.group[*root], buf)?;
    let ty = rootmeta.dtype;
    let (send, recv) = if p == *root {
        // SAFETY: live memory of the root.
        let s = unsafe { packed(cx, r, &l, ty)? };
        (s, s)
    } else {
        (0, landing(cx, r, &l, ty, posts)?)
    };
    calls.push(Call::Broadcast {
        send,
        recv,
        bytes: l.reg.numel() * ty.size_bytes(),
        root: *root as i32,
        comm,
        stream,
    });
    Ok(())
}

/// A data-movement collective as messages, for a world whose processes drive `per_process`
/// ranks each (process of rank `r` = `r / per_process`).
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposed {
    /// In one fixed order: by sending member, then by receiving member, in group order.
    pub messages: Vec<Message>,
    /// Copies inside a receiving process after the messages landed: `src_rank` (the process's
    /// first receiving member) passes on what it received to `dst_rank`, so that each piece
    /// crosses to another process once, not once per receiving rank there.
    pub fan_out: Vec<Message>,
}

/// The messages a data-movement collective amounts to ([`Decomposed`]). All-gather: member
/// `p`'s source to chunk `p` (along `axis`) of every member's destination; all-to-all: chunk
/// `q` (along `split_axis`) of member `p`'s source to chunk `p` (along `concat_axis`) of member
/// `q`'s destination; broadcast: the root's buffer to every other member's. A member's own part
/// is a message to itself (a device copy). What several members of another process receive
/// alike (all-gather, broadcast) travels once to the first of them and fans out from there.
///
/// # Errors
/// Reductions (all-reduce, reduce-scatter, reduce): a sum of several members has no message
/// form;
/// members that disagree on the collective; chunks that do not divide the regions.
pub fn decompose(call: &CollectiveCall, per_process: usize) -> Result<Decomposed> {
    let n = call.group.len();
    let proc_of = |p: usize| process_of(call.group[p], per_process);
    let chunk = |v: &View, axis: usize, q: usize| chunk_view(v, axis, n, q);
    let disagree = || RuntimeError::Schedule(format!("members of group {:?} disagree", call.group));
    let mut out = Decomposed {
        messages: Vec::new(),
        fan_out: Vec::new(),
    };
    // Member p's `src` to every receiver's view: once per other process, then fanned out.
    let replicate = |out: &mut Decomposed, p: usize, src: &View, receivers: &[(usize, View)]| {
        let msg = |a: usize, sv: &View, b: usize, dv: &View| Message {
            src_rank: call.group[a],
            src: sv.clone(),
            dst_rank: call.group[b],
            dst: dv.clone(),
            tag: 0,
        };
        let mut first_in: Vec<(usize, usize, View)> = Vec::new(); // (process, member, view)
        for (q, dst) in receivers {
            let pq = proc_of(*q);
            if pq == proc_of(p) {
                out.messages.push(msg(p, src, *q, dst));
            } else if let Some((_, q0, v0)) = first_in.iter().find(|(pr, _, _)| *pr == pq) {
                out.fan_out.push(msg(*q0, v0, *q, dst));
            } else {
                out.messages.push(msg(p, src, *q, dst));
                first_in.push((pq, *q, dst.clone()));
            }
        }
    };
    for (p, mp) in call.members.iter().enumerate() {
        match mp {
            Collective::AllGather { src, .. } => {
                let mut receivers = Vec::with_capacity(n);
                for (q, mq) in call.members.iter().enumerate() {
                    let Collective::AllGather { dst, axis, .. } = mq else {
                        return Err(disagree());
                    };
                    receivers.push((q, chunk(dst, *axis, p)?));
                }
                replicate(&mut out, p, src, &receivers);
            }
            Collective::AllToAll {
                src, split_axis, ..
            } => {
                for (q, mq) in call.members.iter().enumerate() {
                    let Collective::AllToAll {
                        dst, concat_axis, ..
                    } = mq
                    else {
                        return Err(disagree());
                    };
                    out.messages.push(Message {
                        src_rank: call.group[p],
                        src: chunk(src, *split_axis, q)?,
                        dst_rank: call.group[q],
                        dst: chunk(dst, *concat_axis, p)?,
                        tag: 0,
                    });
                }
            }
            Collective::Broadcast { buf, root } => {
                if p != *root {
                    continue;
                }
                let mut receivers = Vec::with_capacity(n);
                for (q, mq) in call.members.iter().enumerate() {
                    let Collective::Broadcast { buf: b, .. } = mq else {
                        return Err(disagree());
                    };
                    if q != p {
                        receivers.push((q, b.clone()));
                    }
                }
                replicate(&mut out, p, buf, &receivers);
            }
            Collective::AllReduce { .. }
            | Collective::ReduceScatter { .. }
            | Collective::Reduce { .. } => {
                return Err(RuntimeError::Unsupported(format!(
                    "group {:?} has several members in one process and members in another, and it reduces: NCCL between processes carries such a group only when it moves data (all-gather, all-to-all, broadcast). Schedule the reduction per mesh level (one group inside each process, one with a member per process)",
                    call.group
                )));
            }
        }
    }
    Ok(out)
}

/// One half of a point-to-point exchange for [`group_send_recv`]: `bytes` sent from or received
/// into `buf` by the communicator handle `comm` (to or from its rank `peer`) on `stream`.
#[derive(Debug, Clone, Copy)]
pub struct P2p {
    pub send: bool,
    pub buf: u64,
    pub bytes: usize,
    pub peer: i32,
    pub comm: ns::ncclComm_t,
    pub stream: ns::cudaStream_t,
}

/// Issues `ops` (`ncclSend` / `ncclRecv` of bytes) between one group start and end (the link
/// measurements use it).
///
/// # Safety
/// Every buffer must be live device memory of its communicator's device, of at least `bytes`;
/// every stream must belong to that device.
pub unsafe fn group_send_recv(ops: &[P2p]) -> Result<()> {
    let calls: Vec<Call> = ops
        .iter()
        .map(|o| {
            let (buf, bytes, peer, comm, stream) = (o.buf, o.bytes, o.peer, o.comm, o.stream);
            if o.send {
                Call::Send {
                    buf,
                    bytes,
                    peer,
                    comm,
                    stream,
                }
            } else {
                Call::Recv {
                    buf,
                    bytes,
                    peer,
                    comm,
                    stream,
                }
            }
        })
        .collect();
    // SAFETY: per the caller.
    unsafe { issue(&calls) }
}

/// Issues the calls between one group start and end.
///
/// # Safety
/// Every buffer must be live device memory of the call's communicator device, sized as
/// described; the streams must belong to those devices.
unsafe fn issue(calls: &[Call]) -> Result<()> {
    if calls.is_empty() {
        return Ok(());
    }
    cudarc::nccl::result::group_start().map_err(nccl_err("ncclGroupStart"))?;
    let mut first_err = Ok(());
    for c in calls {
        // SAFETY: per the caller.
        let r = unsafe {
            match *c {
                Call::Send {
                    buf,
                    bytes,
                    peer,
                    comm,
                    stream,
                } => check(
                    ns::ncclSend(
                        buf as *const _,
                        bytes,
                        ns::ncclDataType_t::ncclUint8,
                        peer,
                        comm,
                        stream,
                    ),
                    "ncclSend",
                ),
                Call::Recv {
                    buf,
                    bytes,
                    peer,
                    comm,
                    stream,
                } => check(
                    ns::ncclRecv(
                        buf as *mut _,
                        bytes,
                        ns::ncclDataType_t::ncclUint8,
                        peer,
                        comm,
                        stream,
                    ),
                    "ncclRecv",
                ),
                Call::AllReduce {
                    buf,
                    count,
                    dtype,
                    comm,
                    stream,
                } => check(
                    ns::ncclAllReduce(
                        buf as *const _,
                        buf as *mut _,
                        count,
                        nccl_type(dtype),
                        ns::ncclRedOp_t::ncclSum,
                        comm,
                        stream,
                    ),
                    "ncclAllReduce",
                ),
                Call::AllGather {
                    send,
                    recv,
                    bytes,
                    comm,
                    stream,
                } => check(
                    ns::ncclAllGather(
                        send as *const _,
                        recv as *mut _,
                        bytes,
                        ns::ncclDataType_t::ncclUint8,
                        comm,
                        stream,
                    ),
                    "ncclAllGather",
                ),
                Call::ReduceScatter {
                    send,
                    recv,
                    count,
                    dtype,
                    comm,
                    stream,
                } => check(
                    ns::ncclReduceScatter(
                        send as *const _,
                        recv as *mut _,
                        count,
                        nccl_type(dtype),
                        ns::ncclRedOp_t::ncclSum,
                        comm,
                        stream,
                    ),
                    "ncclReduceScatter",
                ),
                Call::Reduce {
                    send,
                    recv,
                    count,
                    dtype,
                    root,
                    comm,
                    stream,
                } => check(
                    ns::ncclReduce(
                        send as *const _,
                        recv as *mut _,
                        count,
                        nccl_type(dtype),
                        ns::ncclRedOp_t::ncclSum,
                        root,
                        comm,
                        stream,
                    ),
                    "ncclReduce",
                ),
                Call::Broadcast {
                    send,
                    recv,
                    bytes,
                    root,
                    comm,
                    stream,
                } => check(
                    ns::ncclBroadcast(
                        send as *const _,
                        recv as *mut _,
                        bytes,
                        ns::ncclDataType_t::ncclUint8,
                        root,
                        comm,
                        stream,
                    ),
                    "ncclBroadcast",
                ),
            }
        };
        if first_err.is_ok() {
            first_err = r;
        }
    }
    // The group is always closed, also after a failed call.
    let end = cudarc::nccl::result::group_end().map_err(nccl_err("ncclGroupEnd"));
    first_err.and(end.map(|_| ()))
}

impl Transport for NcclTransport {
    fn name(&self) -> &'static str {
        if self.bridge.is_some() {
            "nccl bridge (one process per node, its ranks share a GPU: device copies inside a process, one NCCL rank per process between them)"
        } else if self.multi_process {
            "nccl (one process per GPU or node: world communicator split per group)"
        } else {
            "nccl (one process, one communicator per group; groups sharing a GPU use copies)"
        }
    }

    fn check_message(&self, mem: &MemTable, msg: &Message) -> Result<()> {
        if !self.nccl_message(msg) {
            return self.fallback.check_message(mem, msg);
        }
        let (s, d) = (
            mem.meta(msg.src_rank, &msg.src)?,
            mem.meta(msg.dst_rank, &msg.dst)?,
        );
        super::ops::check_copy(&s, &d)?;
        for (r, other) in [(msg.src_rank, msg.dst_rank), (msg.dst_rank, msg.src_rank)] {
            if self.is_local(r) {
                self.p2p(r, other)?;
            }
        }
        Ok(())
    }

    fn check_plan_collective(&self, call: &CollectiveCall) -> Result<()> {
        // A mixed group that cannot run as messages (a reduction) stops every process, members
        // or not: a process outside it would otherwise wait on the bridge for the others.
        if self.mixed_group(call) {
            decompose(call, self.per_process)?;
        }
        Ok(())
    }

    fn check_collective(&self, mem: &MemTable, call: &CollectiveCall) -> Result<()> {
        // Shapes and types, as the copy transport checks them (from metadata: members of
        // other processes have no addresses here).
        self.fallback.check_collective(mem, call)?;
        if self.mixed(call) {
            let d = decompose(call, self.per_process)?;
            for m in d.messages.iter().filter(|m| self.involved(m)) {
                self.check_message(mem, m)?;
            }
            for m in d.fan_out.iter().filter(|m| self.is_local(m.src_rank)) {
                self.fallback.check_message(mem, m)?;
            }
        } else if self.nccl_collective(call) {
            for r in call.group.iter().filter(|r| self.is_local(**r)) {
                self.group_comm(&call.group, *r)?;
            }
        } else if call.group.iter().any(|r| !self.is_local(*r)) {
            return Err(RuntimeError::Unsupported(format!(
                "group {:?} has no NCCL communicator and spans processes",
                call.group
            )));
        }
        Ok(())
    }

    fn message_work(&self, msg: &Message) -> Work {
        if !self.nccl_message(msg) {
            return self.fallback.message_work(msg);
        }
        [msg.src_rank, msg.dst_rank]
            .into_iter()
            .filter(|r| self.is_local(*r))
            .map(|r| (r, vec![r]))
            .collect()
    }

    fn collective_work(&self, call: &CollectiveCall) -> Work {
        if self.mixed(call) {
            // `check_collective` refused what does not decompose.
            let Ok(d) = decompose(call, self.per_process) else {
                return Vec::new();
            };
            let mut w: Work = d
                .messages
                .iter()
                .filter(|m| self.involved(m))
                .flat_map(|m| self.message_work(m))
                .collect();
            // Fan-outs run on the first receiver's stream and write the others' memory.
            w.extend(
                d.fan_out
                    .iter()
                    .filter(|m| self.is_local(m.src_rank))
                    .map(|m| (m.src_rank, vec![m.src_rank, m.dst_rank])),
            );
            return w;
        }
        if !self.nccl_collective(call) {
            return self.fallback.collective_work(call);
        }
        call.group
            .iter()
            .filter(|r| self.is_local(**r))
            .map(|r| (*r, vec![*r]))
            .collect()
    }

    /// # Safety
    /// As [`Transport::stage`].
    unsafe fn stage(&mut self, cx: &mut TransferCx<'_>, st: &StageTransfers) -> Result<()> {
        // What this process takes part in: messages (mixed collectives as messages) and the
        // other collectives with a local member.
        let (msgs, fan_out) = self.stage_messages(st)?;
        let colls: Vec<&CollectiveCall> = st
            .collectives
            .iter()
            .filter(|c| self.member(c) && !self.mixed(c))
            .collect();
        // Copies first (they reset and reuse their streams' scratch in stream order).
        let copy_msgs: Vec<&Message> = msgs.iter().filter(|m| !self.nccl_message(m)).collect();
        let copy_colls: Vec<&CollectiveCall> = colls
            .iter()
            .copied()
            .filter(|c| !self.nccl_collective(c))
            .collect();
        for m in copy_msgs {
            // SAFETY: per the caller.
            unsafe { self.fallback.message(cx, m)? };
        }
        for c in copy_colls {
            // SAFETY: per the caller.
            unsafe { self.fallback.collective(cx, c)? };
        }
        let nccl_msgs: Vec<&Message> = msgs.iter().filter(|m| self.nccl_message(m)).collect();
        let nccl_colls: Vec<&CollectiveCall> = colls
            .iter()
            .copied()
            .filter(|c| self.nccl_collective(c))
            .collect();
        if nccl_msgs.is_empty() && nccl_colls.is_empty() {
            return Ok(());
        }
        // Scratch of every local stream used below holds this stage's buffers until the
        // unpacking: reset once, never in between.
        let mut used = std::collections::BTreeSet::new();
        for m in &nccl_msgs {
            used.extend(
                [m.src_rank, m.dst_rank]
                    .into_iter()
                    .filter(|r| self.is_local(*r)),
            );
        }
        for c in &nccl_colls {
            used.extend(c.group.iter().copied().filter(|r| self.is_local(*r)));
        }
        for r in &used {
            cx.scratch[*r].reset();
        }
        let mut calls = Vec::new();
        let mut posts = Vec::new();
        for m in nccl_msgs {
            // SAFETY: per the caller.
            unsafe { self.plan_message(cx, m, &mut calls, &mut posts)? };
        }
        for c in nccl_colls {
            // SAFETY: per the caller.
            unsafe { self.plan_collective(cx, c, &mut calls, &mut posts)? };
        }
        // Fan-outs of mixed collectives: on the first receiver's stream, after its landing
        // (the posts run in order).
        for m in &fan_out {
            posts.push(Post::Copy {
                rank: m.src_rank,
                src: cx.mem.loc(m.src_rank, &m.src)?,
                dst: cx.mem.loc(m.dst_rank, &m.dst)?,
            });
        }
        // SAFETY: buffers are live slots or scratch of the calls' ranks (packed above, on the
        // same streams, so the NCCL kernels run after the packing).
        unsafe { issue(&calls)? };
        for p in posts {
            match p {
                Post::Copy { rank, src, dst } => {
                    let mut c = cx.copy_cx(rank)?;
                    // SAFETY: scratch filled by NCCL on this stream; `dst` is rank memory.
                    unsafe { copy(&mut c, &src, &dst)? };
                }
                Post::LseMerge {
                    rank,
                    base,
                    n,
                    rows,
                    d,
                    o,
                    lse,
                } => {
                    let part = rows * d + rows;
                    let mut c = cx.copy_cx(rank)?;
                    let oa = Loc::dense(base, DType::F32, rows * d);
                    let la = Loc::dense(base + (rows * d * 4) as u64, DType::F32, rows);
                    // SAFETY: the gathered parts lie in this stream's scratch; merging in group
                    // order into part 0 gives every member the same bits.
                    unsafe {
                        for q in 1..n {
                            let at = base + (q * part * 4) as u64;
                            let op = Loc::dense(at, DType::F32, rows * d);
                            let lp = Loc::dense(at + (rows * d * 4) as u64, DType::F32, rows);
                            enqueue_lse_merge(&mut c, &oa, &la, &op, &lp, rows, d)?;
                        }
                        copy(&mut c, &oa, &o)?;
                        copy(&mut c, &la, &lse)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// # Safety
    /// As [`Transport::message`].
    unsafe fn message(&mut self, cx: &mut TransferCx<'_>, msg: &Message) -> Result<()> {
        let st = StageTransfers {
            messages: vec![msg.clone()],
            collectives: vec![],
        };
        // SAFETY: per the caller.
        unsafe { self.stage(cx, &st) }
    }

    /// # Safety
    /// As [`Transport::collective`].
    unsafe fn collective(&mut self, cx: &mut TransferCx<'_>, call: &CollectiveCall) -> Result<()> {
        let st = StageTransfers {
            messages: vec![],
            collectives: vec![call.clone()],
        };
        // SAFETY: per the caller.
        unsafe { self.stage(cx, &st) }
    }

    fn async_error(&self) -> Option<String> {
        if let Some(e) = self.bridge.as_ref().and_then(|b| b.async_error()) {
            return Some(format!("bridge communicator of this process: {e}"));
        }
        for (r, c) in &self.world {
            if let Some(e) = c.async_error() {
                return Some(format!("world communicator of rank {r}: {e}"));
            }
        }
        for (g, m) in &self.groups {
            for (r, c) in m {
                if let Some(e) = c.async_error() {
                    return Some(format!("communicator of group {g:?} (rank {r}): {e}"));
                }
            }
        }
        None
    }

    fn can_abort(&self) -> bool {
        self.bridge.as_ref().is_some_and(|b| !b.raw().is_null())
            || self.world.values().any(|c| !c.raw().is_null())
            || self
                .groups
                .values()
                .any(|m| m.values().any(|c| !c.raw().is_null()))
    }

    fn abort(&mut self) -> Vec<String> {
        // The communicators split from the world first, then the world.
        let mut n = 0;
        for m in self.groups.values_mut() {
            for c in m.values_mut() {
                n += usize::from(!c.raw().is_null());
                c.abort();
            }
        }
        for c in self.world.values_mut().chain(self.bridge.as_mut()) {
            n += usize::from(!c.raw().is_null());
            c.abort();
        }
        if n == 0 {
            Vec::new()
        } else {
            vec![format!(
                "{n} NCCL communicator handle(s) of this process aborted (ncclCommAbort)"
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::schedule::tests::view;

    /// A mixed all-to-all of 3 members becomes 9 messages in (sender, receiver) order, chunk q
    /// of p's source landing in chunk p of q's destination.
    #[test]
    fn decompose_all_to_all() {
        let call = CollectiveCall {
            group: vec![0, 1, 4],
            members: (0..3)
                .map(|_| Collective::AllToAll {
                    src: view(0, 0, 6),
                    dst: view(1, 0, 6),
                    split_axis: 0,
                    concat_axis: 0,
                })
                .collect(),
        };
        let d = decompose(&call, 4).unwrap();
        assert!(d.fan_out.is_empty());
        let m = d.messages;
        assert_eq!(m.len(), 9);
        let m5 = &m[5]; // p = 1, q = 2
        assert_eq!((m5.src_rank, m5.dst_rank), (1, 4));
        assert_eq!(m5.src, view(0, 4, 2));
        assert_eq!(m5.dst, view(1, 2, 2));
        assert_eq!((m[0].src_rank, m[0].dst_rank), (0, 0));
    }

    /// All-gather over [0, 1 | 4, 5] (2 ranks per process): what both ranks of the other
    /// process receive crosses once, to the first of them, and fans out from there; the
    /// broadcast likewise.
    #[test]
    fn decompose_gather_and_broadcast() {
        let call = CollectiveCall {
            group: vec![0, 1, 4, 5],
            members: (0..4)
                .map(|_| Collective::AllGather {
                    src: view(0, 0, 3),
                    dst: view(1, 0, 12),
                    axis: 0,
                })
                .collect(),
        };
        let d = decompose(&call, 2).unwrap();
        let pairs = |v: &[Message]| -> Vec<(usize, usize)> {
            v.iter().map(|m| (m.src_rank, m.dst_rank)).collect()
        };
        // Member 0 (rank 0): to itself, to 1 (same process), to 4 only across.
        assert_eq!(pairs(&d.messages[..3]), vec![(0, 0), (0, 1), (0, 4)]);
        assert_eq!(d.messages.len(), 12);
        assert_eq!(d.fan_out.len(), 4);
        // Rank 4 passes rank 0's chunk (chunk 0) on to rank 5.
        assert_eq!((d.fan_out[0].src_rank, d.fan_out[0].dst_rank), (4, 5));
        assert_eq!(d.fan_out[0].src, view(1, 0, 3));
        assert_eq!(d.fan_out[0].dst, view(1, 0, 3));
        // Rank 5's chunk (chunk 3) crosses to rank 0 and fans out to rank 1.
        assert_eq!((d.fan_out[3].src_rank, d.fan_out[3].dst_rank), (0, 1));
        assert_eq!(d.fan_out[3].dst, view(1, 9, 3));
        // One rank per process: nothing to fan out.
        assert!(decompose(&call, 1).unwrap().fan_out.is_empty());
        let call = CollectiveCall {
            group: vec![0, 1, 4, 5],
            members: (0..4)
                .map(|_| Collective::Broadcast {
                    buf: view(0, 0, 4),
                    root: 1,
                })
                .collect(),
        };
        let d = decompose(&call, 2).unwrap();
        assert_eq!(pairs(&d.messages), vec![(1, 0), (1, 4)]);
        assert_eq!(pairs(&d.fan_out), vec![(4, 5)]);
    }

    /// A reduction has no message form: refused, naming the group.
    #[test]
    fn decompose_refuses_reductions() {
        let call = CollectiveCall {
            group: vec![0, 1, 4],
            members: (0..3)
                .map(|_| Collective::AllReduce {
                    bufs: vec![view(0, 0, 4)],
                    kind: CombineKind::Add,
                })
                .collect(),
        };
        let e = decompose(&call, 2).unwrap_err().to_string();
        assert!(e.contains("[0, 1, 4]") && e.contains("reduces"), "{e}");
        // A reduce to one member too.
        let call = CollectiveCall {
            group: vec![0, 1, 4],
            members: (0..3)
                .map(|p| Collective::Reduce {
                    src: view(0, 0, 4),
                    dst: (p == 2).then(|| view(0, 4, 4)),
                    root: 2,
                    kind: CombineKind::Add,
                })
                .collect(),
        };
        let e = decompose(&call, 2).unwrap_err().to_string();
        assert!(e.contains("[0, 1, 4]") && e.contains("reduces"), "{e}");
    }

    /// bf16 into bf16 sums in bf16 (half the bytes on the wire); an f32 side widens; other
    /// types are refused.
    #[test]
    fn reduce_type_keeps_bf16_and_widens_mixed() {
        use DType::*;
        assert_eq!(reduce_type(BF16, BF16).unwrap(), BF16);
        assert_eq!(reduce_type(F32, F32).unwrap(), F32);
        assert_eq!(reduce_type(BF16, F32).unwrap(), F32);
        assert_eq!(reduce_type(F32, BF16).unwrap(), F32);
        let e = reduce_type(F16, F16).unwrap_err().to_string();
        assert!(e.contains("f16"), "{e}");
    }
}
