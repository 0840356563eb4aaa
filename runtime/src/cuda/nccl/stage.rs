//! [`Transport`] for [`NcclTransport`]: a stage's three phases (pack, one NCCL group, unpack).

use super::*;

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
        crate::cuda::ops::check_copy(&s, &d)?;
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
