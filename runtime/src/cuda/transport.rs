//! How transfers move data. [`Transport`] is the seam between the executor and the wire:
//! the executor hands it the matched messages and collective calls of a stage, after the
//! stage's dependencies are enqueued; the transport enqueues them on the ranks' transfer
//! streams.
//!
//! [`CopyTransport`] moves data with copies and the combine kernels, within one process:
//! * all ranks on one GPU (virtual ranks, also named [`VirtualTransport`]): a message is one
//!   device-to-device copy on the receiver's transfer stream; a collective is a sequence of
//!   copies and combine kernels on its leader's (first member's) transfer stream, combining
//!   members in group order so every member ends with identical bits;
//! * ranks on several GPUs (peer mode): the same operations, with copies between devices as
//!   copy-engine peer copies (`cuMemcpyPeerAsync`, see `mem`). A message is pulled by the
//!   receiver; an all-reduce is pulled into the leader's scratch, combined there, and pushed
//!   back; a reduce-scatter, all-gather, all-to-all or broadcast whose group spans devices is
//!   pulled by every member on its own transfer stream (a reduce-scatter member pulls and
//!   combines its own chunk; kernels never touch peer memory); a reduce is pulled by its root,
//!   which combines every member's source into its destination on its own stream.
//!
//! `nccl::NcclTransport` is the other implementation (NCCL kernels on every rank's stream).

use super::device_kernels::{DeviceKernels, SUM_PARTS};
use super::error::{Result, RuntimeError};
use super::mem::{copy, operand, write_back, CopyCx, Loc, MemTable, Peers, Scratch};
use super::ops::{check_copy, check_f32, enqueue_add, enqueue_lse_merge, lse_shape};
use super::placement::DeviceMap;
use super::schedule::{chunk_view, CollectiveCall, Message, StageTransfers};
use cudarc::driver::CudaStream;
use mercury_plan::{Collective, CombineKind, DType, View};
use std::sync::Arc;

/// What a transport may use while enqueuing one stage's transfers.
pub struct TransferCx<'a> {
    pub mem: &'a MemTable,
    /// Transfer stream of each rank.
    pub streams: &'a [Arc<CudaStream>],
    /// Scratch of each rank's transfer stream.
    pub scratch: &'a mut [Scratch],
    /// Device index (into `dks` and `max_pitch`) of each rank.
    pub rank_dev: &'a [usize],
    /// Device kernels of each device.
    pub dks: &'a [DeviceKernels],
    /// Largest 2-D copy pitch of each device.
    pub max_pitch: &'a [usize],
    /// Contexts of every device (multi-device executors).
    pub peers: Option<&'a Peers>,
}

impl TransferCx<'_> {
    /// The copy context of `rank`'s transfer stream, with the stream's device current.
    pub fn copy_cx(&mut self, rank: usize) -> Result<CopyCx<'_>> {
        let here = self.here(rank);
        let stream = &self.streams[rank];
        stream
            .context()
            .bind_to_thread()
            .map_err(RuntimeError::driver("bind context"))?;
        let d = self.rank_dev[rank];
        Ok(CopyCx {
            stream,
            scratch: &mut self.scratch[rank],
            dk: &self.dks[d],
            max_pitch: self.max_pitch[d],
            peers: self.peers,
            here,
        })
    }

    /// Device id of `rank` (what its locations carry; 0 in the virtual mode).
    pub fn here(&self, rank: usize) -> usize {
        self.mem.devs.get(rank).copied().unwrap_or(0)
    }
}

/// Work of one transfer: the rank whose transfer stream runs it, with the ranks whose memory
/// that stream's work touches (what the executor's point-to-point ordering needs).
pub type Work = Vec<(usize, Vec<usize>)>;

/// Moves the data of matched messages and collective calls.
pub trait Transport {
    /// Name for logs and reports.
    fn name(&self) -> &'static str;
    /// Checks, before anything runs, that `msg` can be carried out (types, counts).
    fn check_message(&self, mem: &MemTable, msg: &Message) -> Result<()> {
        check_copy(
            &mem.meta(msg.src_rank, &msg.src)?,
            &mem.meta(msg.dst_rank, &msg.dst)?,
        )
    }
    /// Checks, before anything runs, that `call` can be carried out (types, shapes).
    fn check_collective(&self, mem: &MemTable, call: &CollectiveCall) -> Result<()>;
    /// Checks every collective of the plan, also those without a rank of this process: what
    /// no process can carry out must stop every process before anything runs, not only its
    /// members (default: nothing to check).
    fn check_plan_collective(&self, _call: &CollectiveCall) -> Result<()> {
        Ok(())
    }
    /// The transfer streams [`Transport::message`] enqueues `msg` on, each with the ranks
    /// whose memory its work touches (default: the receiver's stream, touching both).
    fn message_work(&self, msg: &Message) -> Work {
        vec![(msg.dst_rank, vec![msg.src_rank, msg.dst_rank])]
    }
    /// As [`Transport::message_work`] for a collective (default: the leader's stream, touching
    /// every member).
    fn collective_work(&self, call: &CollectiveCall) -> Work {
        vec![(call.leader(), call.group.clone())]
    }
    /// Enqueues one stage's transfers (default: every message, then every collective).
    ///
    /// # Safety
    /// As [`Transport::message`], for every transfer of the stage.
    unsafe fn stage(&mut self, cx: &mut TransferCx<'_>, st: &StageTransfers) -> Result<()> {
        for m in &st.messages {
            // SAFETY: per the caller.
            unsafe { self.message(cx, m)? };
        }
        for c in &st.collectives {
            // SAFETY: per the caller.
            unsafe { self.collective(cx, c)? };
        }
        Ok(())
    }
    /// Enqueues one message.
    ///
    /// # Safety
    /// The message's views must be live memory of the executor (as resolved in `cx.mem`), and
    /// the stage's dependencies (barrier or peer waits) must already be enqueued on the
    /// streams used, which must be those [`Transport::message_work`] names (likewise for
    /// collectives).
    unsafe fn message(&mut self, cx: &mut TransferCx<'_>, msg: &Message) -> Result<()>;
    /// Enqueues one collective call.
    ///
    /// # Safety
    /// As [`Transport::message`].
    unsafe fn collective(&mut self, cx: &mut TransferCx<'_>, call: &CollectiveCall) -> Result<()>;
    /// An asynchronous error of the wire, described (NCCL: `ncclCommGetAsyncError` on every
    /// communicator of this process), polled while the executor waits; `None`: all is well
    /// (default: copies report their errors through CUDA).
    fn async_error(&self) -> Option<String> {
        None
    }
    /// Ends whatever the transport has in flight after a fault, so that no GPU stays busy on a
    /// peer that will never answer (NCCL: `ncclCommAbort` on every communicator). The transport
    /// is unusable afterwards. Returns notes for the fault report (default: nothing to do).
    fn abort(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Whether [`Transport::abort`] has something to end: communicators whose other members
    /// (maybe in other processes) could wait forever on this process (default: no).
    fn can_abort(&self) -> bool {
        false
    }
}

/// Copies and combine kernels within one process: virtual ranks on one GPU, or ranks on
/// several GPUs of one node with peer copies between them (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct CopyTransport {
    /// Rank -> device; `None`: every rank on one device.
    devices: Option<DeviceMap>,
}

/// The copy transport with every rank on one GPU (the virtual mode).
pub type VirtualTransport = CopyTransport;

impl CopyTransport {
    /// Every rank on one device.
    pub fn single_device() -> CopyTransport {
        CopyTransport { devices: None }
    }
    /// Ranks placed by `devices` (copies between devices are peer copies).
    pub fn placed(devices: DeviceMap) -> CopyTransport {
        CopyTransport {
            devices: (!devices.is_single_device()).then_some(devices),
        }
    }
    /// Whether the members of `group` sit on more than one device.
    fn spans(&self, group: &[usize]) -> bool {
        self.devices
            .as_ref()
            .is_some_and(|m| group.iter().any(|r| !m.same_device(*r, group[0])))
    }
}

fn locs(mem: &MemTable, group: &[usize], views: &[&View]) -> Result<Vec<Loc>> {
    group
        .iter()
        .zip(views)
        .map(|(r, v)| mem.loc(*r, v))
        .collect()
}

/// Shapes, types and devices of the members' views (also of other processes' ranks).
fn metas(mem: &MemTable, group: &[usize], views: &[&View]) -> Result<Vec<Loc>> {
    group
        .iter()
        .zip(views)
        .map(|(r, v)| mem.meta(*r, v))
        .collect()
}

fn member_views<'c>(
    call: &'c CollectiveCall,
    pick: impl Fn(&'c Collective) -> Option<&'c View>,
) -> Result<Vec<&'c View>> {
    call.members
        .iter()
        .map(|m| {
            pick(m).ok_or_else(|| {
                RuntimeError::Schedule(format!("collective members disagree: {m:?}"))
            })
        })
        .collect()
}

/// A reduce's operands, resolved by `at` (memory or metadata): every member's source in group
/// order, and the root's destination.
///
/// # Errors
/// An lse merge, members that are not all reduces, a root outside the group or one that names
/// no destination.
pub(super) fn reduce_members(
    call: &CollectiveCall,
    at: impl Fn(usize, &View) -> Result<Loc>,
) -> Result<(Vec<Loc>, Loc)> {
    let Some(Collective::Reduce { root, kind, .. }) = call.members.first() else {
        return Err(RuntimeError::Schedule("not a reduce".into()));
    };
    if *kind != CombineKind::Add {
        return Err(RuntimeError::Unsupported("reduce with lse merge".into()));
    }
    let srcs = member_views(call, |m| match m {
        Collective::Reduce { src, .. } => Some(src),
        _ => None,
    })?;
    let parts = call
        .group
        .iter()
        .zip(srcs)
        .map(|(r, v)| at(*r, v))
        .collect::<Result<Vec<Loc>>>()?;
    let (Some(root_rank), Some(Collective::Reduce { dst: Some(dst), .. })) =
        (call.group.get(*root), call.members.get(*root))
    else {
        return Err(RuntimeError::Schedule(format!(
            "reduce over {:?}: root {root} is outside the group or names no destination",
            call.group
        )));
    };
    Ok((parts, at(*root_rank, dst)?))
}

/// Scratch dtype for reductions of `dtype`: f32 accumulates f32 and bf16.
fn reduce_dtype(dtype: DType, what: &str) -> Result<()> {
    match dtype {
        DType::F32 | DType::BF16 => Ok(()),
        d => Err(RuntimeError::Unsupported(format!(
            "{what} of {} buffers (f32 and bf16 only)",
            d.name()
        ))),
    }
}

impl VirtualTransport {
    /// acc (dense f32 scratch) = sum over members of `parts` in order; then every `outs[i]`
    /// receives it (converted back to its dtype). bf16 results of at most [`SUM_PARTS`] bf16
    /// parts are summed by one `mercury_sum_bf16` instead (the same bits, without the f32
    /// accumulator's round trips through memory).
    ///
    /// # Safety
    /// Every location in `parts` and `outs` is live device memory of the executor, and the
    /// stage's dependencies are already enqueued on `leader`'s stream (as for
    /// [`Transport::collective`]).
    unsafe fn reduce_add(
        cx: &mut TransferCx<'_>,
        leader: usize,
        parts: &[Loc],
        outs: &[Loc],
    ) -> Result<()> {
        let n = parts[0].reg.numel();
        let mut c = cx.copy_cx(leader)?;
        let here = c.here();
        // bf16 parts into bf16 results (bf16 partial sums: a reduce-scatter's chunk, an
        // all-reduce): one kernel reads every part once and writes the sum once, the same bits
        // as the f32 accumulator below.
        if parts.len() <= SUM_PARTS && parts.iter().chain(outs).all(|p| p.dtype == DType::BF16) {
            // SAFETY: parts/outs are live executor memory per the caller; packed and pulled
            // copies and the sum are scratch of this stream.
            unsafe {
                // Each part where it lies, or packed (a peer's: copied over in bf16) in scratch.
                let mut ptrs = Vec::with_capacity(parts.len());
                for p in parts {
                    ptrs.push(operand(&mut c, p, true)?.ptr);
                }
                match outs {
                    // One result in memory no part uses (a reduce-scatter's shard): written
                    // directly.
                    [out] if !parts.iter().any(|p| p.base == out.base) => {
                        let o = operand(&mut c, out, false)?;
                        c.dk.sum_bf16(c.stream, o.ptr, &ptrs, n)?;
                        write_back(&mut c, &o, out)?;
                    }
                    // In place (an all-reduce): the sum in scratch, then copied to every result.
                    _ => {
                        let t = c.scratch.take(n * 2)?;
                        c.dk.sum_bf16(c.stream, t, &ptrs, n)?;
                        for o in outs {
                            copy(&mut c, &Loc::dense(t, DType::BF16, n), o)?;
                        }
                    }
                }
            }
            return Ok(());
        }
        let acc = c.scratch.take(n * 4)?;
        let tmp = c.scratch.take(n * 4)?;
        let acc_l = Loc::dense(acc, DType::F32, n);
        // SAFETY: parts/outs are live executor memory per the caller; acc/tmp
        // are scratch of the leader's stream.
        unsafe {
            copy(&mut c, &parts[0], &acc_l)?;
            for p in &parts[1..] {
                if p.is_on(here) {
                    // An f32 or bf16 part is added where it is (bf16 widened in the kernel).
                    enqueue_add(&mut c, &acc_l, p)?;
                } else {
                    // A peer's part is copied over in its own element type (a bf16 part moves
                    // half the bytes), then added.
                    let tmp_l = Loc::dense(tmp, p.dtype, n);
                    copy(&mut c, p, &tmp_l)?;
                    enqueue_add(&mut c, &acc_l, &tmp_l)?;
                }
            }
            for o in outs {
                copy(&mut c, &acc_l, o)?;
            }
        }
        Ok(())
    }
}

impl Transport for CopyTransport {
    fn name(&self) -> &'static str {
        if self.devices.is_some() {
            "peer (copy-engine peer copies between GPUs + combine kernels)"
        } else {
            "virtual (N ranks on one GPU: device copies + combine kernels)"
        }
    }

    fn collective_work(&self, call: &CollectiveCall) -> Work {
        if !self.spans(&call.group) {
            return vec![(call.leader(), call.group.clone())];
        }
        match &call.members[0] {
            // Every member pulls into its own memory (a reduce-scatter member its own chunk of
            // every source, which it combines).
            Collective::AllGather { .. }
            | Collective::AllToAll { .. }
            | Collective::ReduceScatter { .. } => call
                .group
                .iter()
                .map(|q| (*q, call.group.clone()))
                .collect(),
            Collective::Broadcast { root, .. } => {
                let r = call.group[*root];
                call.group
                    .iter()
                    .filter(|q| **q != r)
                    .map(|q| (*q, vec![r, *q]))
                    .collect()
            }
            // Pulled into the leader's scratch, combined there, pushed back.
            Collective::AllReduce { .. } => vec![(call.leader(), call.group.clone())],
            // The root pulls every member's source and combines into its own destination.
            Collective::Reduce { root, .. } => match call.group.get(*root) {
                Some(r) => vec![(*r, call.group.clone())],
                // Refused by `schedule::build`; the leader stands in.
                None => vec![(call.leader(), call.group.clone())],
            },
        }
    }

    fn check_collective(&self, mem: &MemTable, call: &CollectiveCall) -> Result<()> {
        let n = call.group.len();
        match &call.members[0] {
            Collective::AllGather { axis, .. } => {
                let srcs = member_views(call, |m| match m {
                    Collective::AllGather { src, .. } => Some(src),
                    _ => None,
                })?;
                let dsts = member_views(call, |m| match m {
                    Collective::AllGather { dst, .. } => Some(dst),
                    _ => None,
                })?;
                let s = metas(mem, &call.group, &srcs)?;
                for (q, dv) in dsts.iter().enumerate() {
                    for (p, sp) in s.iter().enumerate() {
                        let d = mem.meta(call.group[q], &chunk_view(dv, *axis, n, p)?)?;
                        check_copy(sp, &d)?;
                    }
                }
                Ok(())
            }
            Collective::AllReduce { bufs, kind } => {
                for i in 0..bufs.len() {
                    let views = member_views(call, |m| match m {
                        Collective::AllReduce { bufs, .. } => bufs.get(i),
                        _ => None,
                    })?;
                    let l = metas(mem, &call.group, &views)?;
                    if l.iter().any(|x| x.reg.numel() != l[0].reg.numel()) {
                        return Err(RuntimeError::Schedule(
                            "all-reduce members differ in size".into(),
                        ));
                    }
                    match kind {
                        CombineKind::Add => {
                            for x in &l {
                                reduce_dtype(x.dtype, "all-reduce")?;
                            }
                        }
                        CombineKind::LseMerge => {
                            for x in &l {
                                check_f32(x, "lse all-reduce buffer")?;
                            }
                        }
                    }
                }
                if *kind == CombineKind::LseMerge {
                    if bufs.len() != 2 {
                        return Err(RuntimeError::Schedule(
                            "lse all-reduce needs bufs [o, lse]".into(),
                        ));
                    }
                    for r in 0..n {
                        let Collective::AllReduce { bufs: m, .. } = &call.members[r] else {
                            return Err(RuntimeError::Schedule(
                                "all-reduce members disagree".into(),
                            ));
                        };
                        let o = mem.meta(call.group[r], &m[0])?;
                        let l = mem.meta(call.group[r], &m[1])?;
                        lse_shape(&o, &l, &o, &l)?;
                    }
                }
                Ok(())
            }
            Collective::ReduceScatter { axis, .. } => {
                for (r, m) in call.members.iter().enumerate() {
                    if let Collective::ReduceScatter { src, dst, .. } = m {
                        let s = mem.meta(call.group[r], &chunk_view(src, *axis, n, r)?)?;
                        let d = mem.meta(call.group[r], dst)?;
                        reduce_dtype(s.dtype, "reduce-scatter")?;
                        reduce_dtype(d.dtype, "reduce-scatter")?;
                        if s.reg.numel() != d.reg.numel() {
                            return Err(RuntimeError::Schedule(
                                "reduce-scatter chunk and dst differ".into(),
                            ));
                        }
                    }
                }
                Ok(())
            }
            Collective::Reduce { .. } => {
                let (parts, out) = reduce_members(call, |r, v| mem.meta(r, v))?;
                for x in parts.iter().chain([&out]) {
                    reduce_dtype(x.dtype, "reduce")?;
                    if x.reg.numel() != out.reg.numel() {
                        return Err(RuntimeError::Schedule(
                            "reduce members' sources and the root's destination differ in size"
                                .into(),
                        ));
                    }
                }
                Ok(())
            }
            Collective::AllToAll {
                split_axis,
                concat_axis,
                ..
            } => {
                for (p, mp) in call.members.iter().enumerate() {
                    for (q, mq) in call.members.iter().enumerate() {
                        if let (
                            Collective::AllToAll { src, .. },
                            Collective::AllToAll { dst, .. },
                        ) = (mp, mq)
                        {
                            let s =
                                mem.meta(call.group[p], &chunk_view(src, *split_axis, n, q)?)?;
                            let d =
                                mem.meta(call.group[q], &chunk_view(dst, *concat_axis, n, p)?)?;
                            check_copy(&s, &d)?;
                        }
                    }
                }
                Ok(())
            }
            Collective::Broadcast { root, .. } => {
                let views = member_views(call, |m| match m {
                    Collective::Broadcast { buf, .. } => Some(buf),
                    _ => None,
                })?;
                let l = metas(mem, &call.group, &views)?;
                let r = l
                    .get(*root)
                    .ok_or_else(|| RuntimeError::Schedule("broadcast root".into()))?;
                for x in &l {
                    check_copy(r, x)?;
                }
                Ok(())
            }
        }
    }

    /// # Safety
    /// As [`Transport::message`].
    unsafe fn message(&mut self, cx: &mut TransferCx<'_>, msg: &Message) -> Result<()> {
        let src = cx.mem.loc(msg.src_rank, &msg.src)?;
        let dst = cx.mem.loc(msg.dst_rank, &msg.dst)?;
        let mut c = cx.copy_cx(msg.dst_rank)?;
        c.scratch.reset();
        // SAFETY: per the caller (both views live; barrier enqueued).
        unsafe { copy(&mut c, &src, &dst) }
    }

    /// # Safety
    /// As [`Transport::collective`].
    unsafe fn collective(&mut self, cx: &mut TransferCx<'_>, call: &CollectiveCall) -> Result<()> {
        let n = call.group.len();
        let leader = call.leader();
        let spans = self.spans(&call.group);
        if spans {
            for r in &call.group {
                cx.scratch[*r].reset();
            }
        } else {
            cx.scratch[leader].reset();
        }
        let mem = cx.mem;
        match &call.members[0] {
            Collective::AllGather { axis, .. } => {
                for (q, mq) in call.members.iter().enumerate() {
                    let Collective::AllGather { dst, .. } = mq else {
                        continue;
                    };
                    let mut c = cx.copy_cx(if spans { call.group[q] } else { leader })?;
                    for (p, mp) in call.members.iter().enumerate() {
                        let Collective::AllGather { src, .. } = mp else {
                            continue;
                        };
                        let s = mem.loc(call.group[p], src)?;
                        let d = mem.loc(call.group[q], &chunk_view(dst, *axis, n, p)?)?;
                        // SAFETY: per the caller.
                        unsafe { copy(&mut c, &s, &d)? };
                    }
                }
                Ok(())
            }
            Collective::AllReduce { bufs, kind } => match kind {
                CombineKind::Add => {
                    for i in 0..bufs.len() {
                        let views = member_views(call, |m| match m {
                            Collective::AllReduce { bufs, .. } => bufs.get(i),
                            _ => None,
                        })?;
                        let l = locs(mem, &call.group, &views)?;
                        // SAFETY: per the caller.
                        unsafe { Self::reduce_add(cx, leader, &l, &l)? };
                    }
                    Ok(())
                }
                CombineKind::LseMerge => {
                    let o = locs(
                        mem,
                        &call.group,
                        &member_views(call, |m| match m {
                            Collective::AllReduce { bufs, .. } => bufs.first(),
                            _ => None,
                        })?,
                    )?;
                    let l = locs(
                        mem,
                        &call.group,
                        &member_views(call, |m| match m {
                            Collective::AllReduce { bufs, .. } => bufs.get(1),
                            _ => None,
                        })?,
                    )?;
                    let (rows, d) = lse_shape(&o[0], &l[0], &o[0], &l[0])?;
                    let mut c = cx.copy_cx(leader)?;
                    let oa = Loc::dense(c.scratch.take(rows * d * 4)?, DType::F32, rows * d);
                    let la = Loc::dense(c.scratch.take(rows * 4)?, DType::F32, rows);
                    // SAFETY: per the caller; oa/la are leader scratch.
                    unsafe {
                        copy(&mut c, &o[0], &oa)?;
                        copy(&mut c, &l[0], &la)?;
                        for p in 1..n {
                            enqueue_lse_merge(&mut c, &oa, &la, &o[p], &l[p], rows, d)?;
                        }
                        for p in 0..n {
                            copy(&mut c, &oa, &o[p])?;
                            copy(&mut c, &la, &l[p])?;
                        }
                    }
                    Ok(())
                }
            },
            Collective::ReduceScatter { axis, kind, .. } => {
                if *kind != CombineKind::Add {
                    return Err(RuntimeError::Unsupported(
                        "reduce-scatter with lse merge".into(),
                    ));
                }
                for p in 0..n {
                    let mut parts = Vec::with_capacity(n);
                    for (r, m) in call.members.iter().enumerate() {
                        let Collective::ReduceScatter { src, .. } = m else {
                            return Err(RuntimeError::Schedule(
                                "reduce-scatter members disagree".into(),
                            ));
                        };
                        parts.push(mem.loc(call.group[r], &chunk_view(src, *axis, n, p)?)?);
                    }
                    let Collective::ReduceScatter { dst, .. } = &call.members[p] else {
                        return Err(RuntimeError::Schedule(
                            "reduce-scatter members disagree".into(),
                        ));
                    };
                    let out = mem.loc(call.group[p], dst)?;
                    // Member p combines its chunk on its own stream when the group spans
                    // devices (each link carries one chunk per direction), else the leader.
                    let by = if spans { call.group[p] } else { leader };
                    // SAFETY: per the caller.
                    unsafe { Self::reduce_add(cx, by, &parts, std::slice::from_ref(&out))? };
                }
                Ok(())
            }
            Collective::Reduce { root, .. } => {
                let (parts, out) = reduce_members(call, |r, v| mem.loc(r, v))?;
                // The root combines on its own stream when the group spans devices (pulling
                // each peer's source over once), else the leader.
                let by = if spans { call.group[*root] } else { leader };
                // SAFETY: per the caller.
                unsafe { Self::reduce_add(cx, by, &parts, std::slice::from_ref(&out))? };
                Ok(())
            }
            Collective::AllToAll {
                split_axis,
                concat_axis,
                ..
            } => {
                // Receiver-major: member q's chunks are all written on one stream (q's own
                // when the group spans devices).
                for (q, mq) in call.members.iter().enumerate() {
                    let mut c = cx.copy_cx(if spans { call.group[q] } else { leader })?;
                    for (p, mp) in call.members.iter().enumerate() {
                        let (Collective::AllToAll { src, .. }, Collective::AllToAll { dst, .. }) =
                            (mp, mq)
                        else {
                            return Err(RuntimeError::Schedule(
                                "all-to-all members disagree".into(),
                            ));
                        };
                        let s = mem.loc(call.group[p], &chunk_view(src, *split_axis, n, q)?)?;
                        let d = mem.loc(call.group[q], &chunk_view(dst, *concat_axis, n, p)?)?;
                        // SAFETY: per the caller.
                        unsafe { copy(&mut c, &s, &d)? };
                    }
                }
                Ok(())
            }
            Collective::Broadcast { root, .. } => {
                let views = member_views(call, |m| match m {
                    Collective::Broadcast { buf, .. } => Some(buf),
                    _ => None,
                })?;
                let l = locs(mem, &call.group, &views)?;
                for (q, x) in l.iter().enumerate() {
                    if q != *root {
                        let mut c = cx.copy_cx(if spans { call.group[q] } else { leader })?;
                        // SAFETY: per the caller.
                        unsafe { copy(&mut c, &l[*root], x)? };
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::schedule::tests::view;

    fn reduce_call(group: Vec<usize>, root: usize) -> CollectiveCall {
        let members = (0..group.len())
            .map(|p| Collective::Reduce {
                src: view(0, 0, 4),
                dst: (p == root).then(|| view(1, 0, 4)),
                root,
                kind: CombineKind::Add,
            })
            .collect();
        CollectiveCall { group, members }
    }

    /// A reduce runs on one stream touching every member: the leader's on one device, the
    /// root's when the group spans devices (it pulls every source and combines there).
    #[test]
    fn reduce_runs_on_the_root_when_the_group_spans_devices() {
        let call = reduce_call(vec![2, 0, 3, 1], 2);
        let one = CopyTransport::single_device();
        assert_eq!(one.collective_work(&call), vec![(2, vec![2, 0, 3, 1])]);
        let spread = CopyTransport::placed(DeviceMap::round_robin(4, 2).unwrap());
        // Member 2 is rank 3.
        assert_eq!(spread.collective_work(&call), vec![(3, vec![2, 0, 3, 1])]);
        // Ranks 0 and 2 share device 0: no span, the leader (rank 0) runs it.
        let call = reduce_call(vec![0, 2], 1);
        assert_eq!(spread.collective_work(&call), vec![(0, vec![0, 2])]);
    }

    /// The operands of a reduce: every member's source in group order and the root's
    /// destination; a root that names none, or an lse merge, is refused.
    #[test]
    fn reduce_members_resolves_sources_and_the_root_destination() {
        let call = reduce_call(vec![2, 0, 1], 1);
        let at =
            |r: usize, v: &View| Ok(Loc::dense(r as u64 * 1000 + v.slot as u64, DType::F32, 4));
        let (parts, out) = reduce_members(&call, at).unwrap();
        let bases: Vec<u64> = parts.iter().map(|p| p.base).collect();
        assert_eq!(bases, vec![2000, 0, 1000]);
        assert_eq!(out.base, 1);
        let mut bad = call.clone();
        if let Collective::Reduce { dst, .. } = &mut bad.members[1] {
            *dst = None;
        }
        assert!(reduce_members(&bad, at).is_err());
        let mut lse = call;
        for m in &mut lse.members {
            if let Collective::Reduce { kind, .. } = m {
                *kind = CombineKind::LseMerge;
            }
        }
        let e = reduce_members(&lse, at).unwrap_err().to_string();
        assert!(e.contains("lse merge"), "{e}");
    }
}
