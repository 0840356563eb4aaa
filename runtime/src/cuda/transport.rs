//! How transfers move data. [`Transport`] is the seam between the executor and the wire:
//! the executor hands it matched messages and collective calls of a stage, after the stage's
//! barrier; the transport enqueues them on the ranks' transfer streams.
//!
//! [`VirtualTransport`] (the only one implemented) serves N virtual ranks on one GPU: a message
//! is one device-to-device copy on the receiver's transfer stream; a collective is a sequence
//! of copies and combine kernels on its leader's (first member's) transfer stream, combining
//! members in group order so every member ends with identical bits. Peer copies between GPUs
//! (`cuMemcpyPeerAsync`) and NCCL would be further implementations of the same trait.

use super::device_kernels::DeviceKernels;
use super::error::{Result, RuntimeError};
use super::mem::{copy, CopyCx, Loc, MemTable, Scratch};
use super::ops::{check_copy, check_f32, enqueue_add, enqueue_lse_merge, lse_shape};
use super::schedule::{chunk_region, CollectiveCall, Message};
use cudarc::driver::CudaStream;
use mercury_plan::{Collective, CombineKind, DType, View};
use std::sync::Arc;

/// What a transport may use while enqueuing one stage's transfers.
pub struct TransferCx<'a> {
    pub mem: &'a MemTable,
    pub dk: &'a DeviceKernels,
    /// Transfer stream of each rank.
    pub streams: &'a [Arc<CudaStream>],
    /// Scratch of each rank's transfer stream.
    pub scratch: &'a mut [Scratch],
    pub max_pitch: usize,
}

impl TransferCx<'_> {
    fn copy_cx(&mut self, rank: usize) -> CopyCx<'_> {
        CopyCx {
            stream: &self.streams[rank],
            scratch: &mut self.scratch[rank],
            dk: self.dk,
            max_pitch: self.max_pitch,
        }
    }
}

/// Moves the data of matched messages and collective calls.
pub trait Transport {
    /// Name for logs and reports.
    fn name(&self) -> &'static str;
    /// Checks, before anything runs, that `call` can be carried out (types, shapes).
    fn check_collective(&self, mem: &MemTable, call: &CollectiveCall) -> Result<()>;
    /// The rank whose transfer stream [`Transport::message`] enqueues `msg` on (the executor
    /// orders that stream after earlier work on both ranks' memory).
    fn message_rank(&self, msg: &Message) -> usize {
        msg.dst_rank
    }
    /// The rank whose transfer stream [`Transport::collective`] enqueues `call` on.
    fn collective_rank(&self, call: &CollectiveCall) -> usize {
        call.leader()
    }
    /// Enqueues one message.
    ///
    /// # Safety
    /// The message's views must be live memory of the executor (as resolved in `cx.mem`), and
    /// the stage's dependencies (barrier or peer waits) must already be enqueued on the stream
    /// used, which must be the one [`Transport::message_rank`] names (likewise for
    /// collectives).
    unsafe fn message(&mut self, cx: &mut TransferCx<'_>, msg: &Message) -> Result<()>;
    /// Enqueues one collective call.
    ///
    /// # Safety
    /// As [`Transport::message`].
    unsafe fn collective(&mut self, cx: &mut TransferCx<'_>, call: &CollectiveCall) -> Result<()>;
}

/// N ranks on one GPU: copies and combine kernels within one context.
#[derive(Debug, Default)]
pub struct VirtualTransport;

fn locs(mem: &MemTable, group: &[usize], views: &[&View]) -> Result<Vec<Loc>> {
    group
        .iter()
        .zip(views)
        .map(|(r, v)| mem.loc(*r, v))
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
    /// receives it (converted back to its dtype).
    unsafe fn reduce_add(
        cx: &mut TransferCx<'_>,
        leader: usize,
        parts: &[Loc],
        outs: &[Loc],
    ) -> Result<()> {
        let n = parts[0].reg.numel();
        let mut c = cx.copy_cx(leader);
        let acc = c.scratch.take(n * 4)?;
        let tmp = c.scratch.take(n * 4)?;
        let acc_l = Loc::dense(acc, DType::F32, n);
        let tmp_l = Loc::dense(tmp, DType::F32, n);
        // SAFETY: parts/outs are live executor memory per the caller; acc/tmp
        // are scratch of the leader's stream.
        unsafe {
            copy(&mut c, &parts[0], &acc_l)?;
            for p in &parts[1..] {
                if p.dtype == DType::F32 {
                    enqueue_add(&mut c, &acc_l, p)?;
                } else {
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

impl Transport for VirtualTransport {
    fn name(&self) -> &'static str {
        "virtual (N ranks on one GPU: device copies + combine kernels)"
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
                let s = locs(mem, &call.group, &srcs)?;
                for (q, dv) in dsts.iter().enumerate() {
                    for (p, sp) in s.iter().enumerate() {
                        let ch = chunk_region(&dv.region, *axis, n, p)
                            .map_err(RuntimeError::Schedule)?;
                        let d = mem.loc(
                            call.group[q],
                            &View {
                                slot: dv.slot,
                                region: ch,
                            },
                        )?;
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
                    let l = locs(mem, &call.group, &views)?;
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
                        let o = mem.loc(call.group[r], &m[0])?;
                        let l = mem.loc(call.group[r], &m[1])?;
                        lse_shape(&o, &l, &o, &l)?;
                    }
                }
                Ok(())
            }
            Collective::ReduceScatter { axis, .. } => {
                for (r, m) in call.members.iter().enumerate() {
                    if let Collective::ReduceScatter { src, dst, .. } = m {
                        let ch = chunk_region(&src.region, *axis, n, r)
                            .map_err(RuntimeError::Schedule)?;
                        let s = mem.loc(
                            call.group[r],
                            &View {
                                slot: src.slot,
                                region: ch,
                            },
                        )?;
                        let d = mem.loc(call.group[r], dst)?;
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
                            let sc = chunk_region(&src.region, *split_axis, n, q)
                                .map_err(RuntimeError::Schedule)?;
                            let dc = chunk_region(&dst.region, *concat_axis, n, p)
                                .map_err(RuntimeError::Schedule)?;
                            let s = mem.loc(
                                call.group[p],
                                &View {
                                    slot: src.slot,
                                    region: sc,
                                },
                            )?;
                            let d = mem.loc(
                                call.group[q],
                                &View {
                                    slot: dst.slot,
                                    region: dc,
                                },
                            )?;
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
                let l = locs(mem, &call.group, &views)?;
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

    unsafe fn message(&mut self, cx: &mut TransferCx<'_>, msg: &Message) -> Result<()> {
        let src = cx.mem.loc(msg.src_rank, &msg.src)?;
        let dst = cx.mem.loc(msg.dst_rank, &msg.dst)?;
        let mut c = cx.copy_cx(self.message_rank(msg));
        c.scratch.reset();
        // SAFETY: per the caller (both views live; barrier enqueued).
        unsafe { copy(&mut c, &src, &dst) }
    }

    unsafe fn collective(&mut self, cx: &mut TransferCx<'_>, call: &CollectiveCall) -> Result<()> {
        let n = call.group.len();
        let leader = self.collective_rank(call);
        cx.scratch[leader].reset();
        let mem = cx.mem;
        match &call.members[0] {
            Collective::AllGather { axis, .. } => {
                let mut c = cx.copy_cx(leader);
                for (q, mq) in call.members.iter().enumerate() {
                    let Collective::AllGather { dst, .. } = mq else {
                        continue;
                    };
                    for (p, mp) in call.members.iter().enumerate() {
                        let Collective::AllGather { src, .. } = mp else {
                            continue;
                        };
                        let ch = chunk_region(&dst.region, *axis, n, p)
                            .map_err(RuntimeError::Schedule)?;
                        let s = mem.loc(call.group[p], src)?;
                        let d = mem.loc(
                            call.group[q],
                            &View {
                                slot: dst.slot,
                                region: ch,
                            },
                        )?;
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
                    let mut c = cx.copy_cx(leader);
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
                        let ch = chunk_region(&src.region, *axis, n, p)
                            .map_err(RuntimeError::Schedule)?;
                        parts.push(mem.loc(
                            call.group[r],
                            &View {
                                slot: src.slot,
                                region: ch,
                            },
                        )?);
                    }
                    let Collective::ReduceScatter { dst, .. } = &call.members[p] else {
                        return Err(RuntimeError::Schedule(
                            "reduce-scatter members disagree".into(),
                        ));
                    };
                    let out = mem.loc(call.group[p], dst)?;
                    // SAFETY: per the caller.
                    unsafe { Self::reduce_add(cx, leader, &parts, std::slice::from_ref(&out))? };
                }
                Ok(())
            }
            Collective::AllToAll {
                split_axis,
                concat_axis,
                ..
            } => {
                let mut c = cx.copy_cx(leader);
                for (p, mp) in call.members.iter().enumerate() {
                    for (q, mq) in call.members.iter().enumerate() {
                        let (Collective::AllToAll { src, .. }, Collective::AllToAll { dst, .. }) =
                            (mp, mq)
                        else {
                            return Err(RuntimeError::Schedule(
                                "all-to-all members disagree".into(),
                            ));
                        };
                        let sc = chunk_region(&src.region, *split_axis, n, q)
                            .map_err(RuntimeError::Schedule)?;
                        let dc = chunk_region(&dst.region, *concat_axis, n, p)
                            .map_err(RuntimeError::Schedule)?;
                        let s = mem.loc(
                            call.group[p],
                            &View {
                                slot: src.slot,
                                region: sc,
                            },
                        )?;
                        let d = mem.loc(
                            call.group[q],
                            &View {
                                slot: dst.slot,
                                region: dc,
                            },
                        )?;
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
                let mut c = cx.copy_cx(leader);
                for (q, x) in l.iter().enumerate() {
                    if q != *root {
                        // SAFETY: per the caller.
                        unsafe { copy(&mut c, &l[*root], x)? };
                    }
                }
                Ok(())
            }
        }
    }
}
