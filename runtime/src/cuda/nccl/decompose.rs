//! Collectives of mixed groups carried out as messages ([`decompose`]), and grouped
//! point-to-point exchanges ([`P2p`]).

use super::*;

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
pub(super) unsafe fn issue(calls: &[Call]) -> Result<()> {
    if calls.is_empty() {
        return Ok(());
    }
    crate::cuda::nccl::lib::group_start().map_err(nccl_err("ncclGroupStart"))?;
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
                    crate::cuda::nccl::lib::ncclSend(
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
                    crate::cuda::nccl::lib::ncclRecv(
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
                    crate::cuda::nccl::lib::ncclAllReduce(
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
                    crate::cuda::nccl::lib::ncclAllGather(
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
                    crate::cuda::nccl::lib::ncclReduceScatter(
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
                    crate::cuda::nccl::lib::ncclReduce(
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
                    crate::cuda::nccl::lib::ncclBroadcast(
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
    let end = crate::cuda::nccl::lib::group_end().map_err(nccl_err("ncclGroupEnd"));
    first_err.and(end.map(|_| ()))
}
