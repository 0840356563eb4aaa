//! Phase A of an NCCL stage: each message and collective of the stage planned as NCCL calls
//! (with the packing before and the unpacking after them) on the members' transfer streams.

use super::*;

pub(super) fn raw_stream(cx: &TransferCx<'_>, rank: usize) -> ns::cudaStream_t {
    cx.streams[rank].cu_stream() as ns::cudaStream_t
}

/// Contiguous send memory for `loc` on `rank`'s transfer stream: its own address or a packed
/// scratch copy (converted to `as_type`).
///
/// # Safety
/// `loc` must be live memory of `rank`.
pub(super) unsafe fn packed(
    cx: &mut TransferCx<'_>,
    rank: usize,
    loc: &Loc,
    as_type: DType,
) -> Result<u64> {
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
pub(super) fn landing(
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
pub(super) fn reduce_type(src: DType, dst: DType) -> Result<DType> {
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
    pub(super) unsafe fn plan_message(
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
    pub(super) unsafe fn plan_collective(
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
pub(super) struct Member<'c> {
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
pub(super) unsafe fn all_reduce_add(
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
pub(super) unsafe fn all_reduce_lse_merge(
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
pub(super) unsafe fn all_gather(
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
pub(super) unsafe fn reduce_scatter(
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
pub(super) unsafe fn all_to_all(
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
pub(super) unsafe fn reduce(
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
pub(super) unsafe fn broadcast(
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
