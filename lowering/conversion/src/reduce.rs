//! `commir.reduce`: partial results accumulate locally (add, or the softmax log-sum-exp merge),
//! fused into the producing patch when nothing else reads its results; a shifted reduction of a
//! tile another rank owns sends the partial tile to its owner in the next stage and the owner
//! merges it the stage after (shift-reduce), overlapped with the next computation.

use crate::compute::StageCx;
use crate::context::{
    combine_kind, err, key, partition_conflict, Event, Lowering, RankBuild, PARTITION_RULE,
};
use crate::patch::narrow;
use crate::placement::owner_of;
use mercury_commir::ReduceKind;
use mercury_commir::Role;
use mercury_ir::Diagnostic;
use mercury_plan::{CommOp, ComputeOp, DType, Region, SlotInit, View};

impl Lowering<'_> {
    /// Lowers one reduce event of `cx`'s rank and stage.
    pub(crate) fn lower_reduce(&mut self, cx: &mut StageCx, e: &Event) -> Result<(), Diagnostic> {
        let Event::Reduce {
            kind,
            values: vals,
            buffer,
            bx,
            shifted,
            levels,
            carry,
            loc,
        } = e
        else {
            return Ok(());
        };
        if self.k.buffer(buffer).map(|b| b.role) == Some(Role::Temp) {
            return Err(err(
                loc,
                format!("reducing into the temp buffer '@{buffer}' is not supported: store the tile into it instead (commir.store)"),
            ));
        }
        let parts = cx.operands(vals, loc)?;
        let r = cx.r;
        let owner = owner_of(
            self.k,
            &self.placement,
            buffer,
            bx,
            &self.mesh,
            &self.ranks[r].coords,
        );
        let target = if *shifted { owner } else { r };
        if let Some(clash) =
            partition_conflict(&self.ranks[target], target, buffer, bx, Some(*kind))
        {
            return Err(err(
                loc,
                format!("this reduction into {bx} of '@{buffer}' (accumulated on rank {target}) {clash}: {PARTITION_RULE}"),
            ));
        }
        if *carry {
            return self.lower_carried(cx, parts, buffer, bx, owner);
        }
        let Some(parts) = parts else {
            // A skipped (fully masked) causal block contributes nothing, but the tile is still
            // an output: its accumulator starts as the reduction's identity (0, or o = 0 with
            // lse = -inf), which is its value when every block of it is masked (the gradient
            // of a key no query sees).
            ensure_masked_acc(&mut self.ranks[target], buffer, bx, *kind);
            return Ok(());
        };
        if target == r {
            self.reduce_locally(cx, vals, parts, buffer, bx, *kind);
            return Ok(());
        }
        // Ranks that differ only on mesh levels no parallel loop around the reduction uses
        // compute the same partial: of each such group only the rank that matches the owner on
        // those levels sends it (the owner's own group: the owner, locally), or the owner
        // would add it once per replica.
        let (me, own) = (&self.ranks[r].coords, &self.ranks[target].coords);
        let replica = (0..me.len()).any(|l| !levels.contains(&l) && me[l] != own[l]);
        if !replica {
            self.send_to_owner(cx, target, parts, buffer, bx, *kind);
        }
        Ok(())
    }

    /// Merges `parts` into the rank's accumulator of the tile: fused into the patch that
    /// produced them when nothing else reads its results, else a combine.
    fn reduce_locally(
        &mut self,
        cx: &StageCx,
        vals: &[mercury_ir::ValueId],
        parts: Vec<View>,
        buffer: &str,
        bx: &Region,
        kind: ReduceKind,
    ) {
        let (r, ps) = (cx.r, cx.ps);
        let acc = ensure_acc(&mut self.ranks[r], buffer, bx, kind);
        let ck = combine_kind(kind);
        // The patch that produced the parts merges straight into the accumulator when nothing
        // else reads its results.
        let single_use = vals.iter().all(|v| {
            cx.events
                .iter()
                .filter(|e| match e {
                    Event::Reduce { values, .. } => values.contains(v),
                    Event::Store { value, .. } => value == v,
                    Event::Patch { inputs, .. } | Event::Compute { inputs, .. } => {
                        inputs.contains(v)
                    }
                    _ => false,
                })
                .count()
                == 1
        });
        // A causal tile cut into blocks (`patch.rs`): every block merges into the accumulator.
        if let Some(ops) = cx.blocks.get(&vals[0]) {
            let st = self.ranks[r].stage(ps);
            let last = st.compute.len();
            let trailing = ops
                .iter()
                .enumerate()
                .all(|(i, (idx, _))| *idx == last - ops.len() + i);
            let foldable = ops.iter().all(|(idx, _)| {
                matches!(&st.compute[*idx], ComputeOp::Patch { patch, .. } if patch.clone().fold(ck))
            });
            if single_use && trailing && foldable && acc.len() == 2 {
                let qd = acc[0].region.rank() - 2;
                for (idx, rows) in ops {
                    if let ComputeOp::Patch { patch, outputs, .. } = &mut st.compute[*idx] {
                        patch.fold(ck);
                        *outputs = vec![narrow(&acc[0], qd, *rows), narrow(&acc[1], qd, *rows)];
                    }
                }
                return;
            }
        }
        let fused = single_use
            && match self.ranks[r].stage(ps).compute.last_mut() {
                Some(ComputeOp::Patch { patch, outputs, .. }) if *outputs == parts => {
                    let ok = patch.fold(ck);
                    if ok {
                        *outputs = acc.clone();
                    }
                    ok
                }
                _ => false,
            };
        if !fused {
            self.ranks[r].stage(ps).compute.push(ComputeOp::Combine {
                kind: ck,
                acc,
                part: parts,
            });
        }
    }

    /// Shift-reduce: sends the partial tile to its owner `target` in the next stage; the owner
    /// merges it the stage after.
    pub(crate) fn send_to_owner(
        &mut self,
        cx: &StageCx,
        target: usize,
        parts: Vec<View>,
        buffer: &str,
        bx: &Region,
        kind: ReduceKind,
    ) {
        let r = cx.r;
        let send_stage = cx.ps + 1;
        let parity = send_stage % 2;
        let count = self.ranks[target]
            .pushed
            .entry((send_stage, buffer.to_string(), key(bx)))
            .or_insert(0);
        let n = *count;
        *count += 1;
        let parts = self.stable_parts(cx, parts, buffer, parity);
        let rkey = (buffer.to_string(), key(bx), parity, n);
        let recv_slots = match self.ranks[target].push_recv.get(&rkey) {
            Some(s) => s.clone(),
            None => {
                let dtypes: Vec<DType> = parts
                    .iter()
                    .map(|p| self.ranks[r].slots[p.slot].dtype)
                    .collect();
                let s: Vec<usize> = parts
                    .iter()
                    .zip(dtypes)
                    .enumerate()
                    .map(|(i, (p, dtype))| {
                        let extra = if n == 0 {
                            String::new()
                        } else {
                            format!("_{n}")
                        };
                        self.ranks[target].slot(
                            format!("{buffer}.partial{parity}{extra}.{i}"),
                            dtype,
                            p.region.extent.clone(),
                            SlotInit::Uninit,
                        )
                    })
                    .collect();
                self.ranks[target].push_recv.insert(rkey, s.clone());
                s
            }
        };
        let mut recv_views = Vec::new();
        for (p, rs) in parts.iter().zip(&recv_slots) {
            let tag = self.next_tag();
            self.ranks[r].stage(send_stage).comm.push(CommOp::Send {
                peer: target,
                src: p.clone(),
                tag,
            });
            let dst = self.ranks[target].whole(*rs);
            self.ranks[target]
                .stage(send_stage)
                .comm
                .push(CommOp::Recv {
                    peer: r,
                    dst: dst.clone(),
                    tag,
                });
            recv_views.push(dst);
        }
        let acc = ensure_acc(&mut self.ranks[target], buffer, bx, kind);
        self.ranks[target]
            .stage(send_stage + 1)
            .compute
            .push(ComputeOp::Combine {
                kind: combine_kind(kind),
                acc,
                part: recv_views,
            });
    }
}

impl Lowering<'_> {
    /// The partial tiles `parts` as the send of the next stage may read them. A part that lies
    /// in a slot the lowering reuses across stages is copied this stage into a send slot of
    /// its own, double-buffered by stage parity: the next stage may overwrite the reused slot
    /// while the send reads it (tenth new-user pass, 2026-12-03: a private temp reduced to
    /// another rank's tile inside an inner loop was refused as an invalid plan). Reused slots:
    /// a stored tile's (one per box for the kernel), a ring or receive slot, an accumulator, an
    /// owner's receive slot of pushed partials, and a compute result's slot when the result is
    /// not one a shifted reduction sends (those get one slot per parity already, `tile.rs`,
    /// `patch.rs`). Any other slot (an input's shard, a patch's per-block output) is written
    /// once and sent as it is. The plan verifier still checks every send against the writes of
    /// its stage. Send slots are numbered per stage (`k`, the rank's k-th copied part of that
    /// buffer in the stage), so a rank holds two per part sent in one stage, not one per tile.
    pub(crate) fn stable_parts(
        &mut self,
        cx: &StageCx,
        parts: Vec<View>,
        buffer: &str,
        parity: usize,
    ) -> Vec<View> {
        let r = cx.r;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                if !self.reused(r, p.slot) {
                    return p;
                }
                let rb = &mut self.ranks[r];
                let count = rb
                    .send_count
                    .entry((cx.ps, buffer.to_string()))
                    .or_insert(0);
                let k = *count;
                *count += 1;
                let skey = (buffer.to_string(), parity, k, p.region.extent.clone());
                let s = match rb.send.get(&skey) {
                    Some(s) => *s,
                    None => {
                        let dtype = rb.slots[p.slot].dtype;
                        let s = rb.slot(
                            format!("{buffer}.send{parity}_{k}.{i}"),
                            dtype,
                            p.region.extent.clone(),
                            SlotInit::Uninit,
                        );
                        rb.send.insert(skey, s);
                        s
                    }
                };
                let dst = rb.whole(s);
                rb.stage(cx.ps).compute.push(ComputeOp::Copy {
                    src: p,
                    dst: dst.clone(),
                });
                dst
            })
            .collect()
    }
}

impl Lowering<'_> {
    /// Whether rank `r`'s `slot` is one the lowering reuses across stages ([`Self::stable_parts`]
    /// lists them).
    fn reused(&self, r: usize, slot: usize) -> bool {
        let rb = &self.ranks[r];
        rb.stored.values().any(|(_, s)| *s == slot)
            || rb.ring.values().any(|s| *s == slot)
            || rb.received.values().flatten().any(|(_, s)| *s == slot)
            || rb.acc.values().any(|(_, s, _)| s.contains(&slot))
            || rb.push_recv.values().flatten().any(|s| *s == slot)
            || rb
                .temps
                .iter()
                .any(|((v, _), s)| *s == slot && !self.sent_values.contains_key(v))
    }
}

/// The rank's accumulator of tile `bx` of `buffer` (zero, and minus infinity for the
/// log-sum-exp half), created on first use.
pub(crate) fn ensure_acc(
    rb: &mut RankBuild,
    buffer: &str,
    bx: &Region,
    kind: ReduceKind,
) -> Vec<View> {
    let k = (buffer.to_string(), key(bx));
    if let Some((_, slots, _)) = rb.acc.get(&k) {
        // A contribution to a tile whose earlier ones were all masked: an ordinary
        // accumulator from now on.
        for s in slots.clone() {
            let init = &mut rb.slots[s].init;
            match init {
                SlotInit::MaskedZero => *init = SlotInit::Zero,
                SlotInit::MaskedNegInf => *init = SlotInit::NegInf,
                _ => {}
            }
        }
    } else {
        let o = rb.slot(
            format!("{buffer}.acc"),
            DType::F32,
            bx.extent.clone(),
            SlotInit::Zero,
        );
        let mut slots = vec![o];
        if kind == ReduceKind::LseMerge {
            let lse_shape = bx.extent[..bx.extent.len().saturating_sub(1)].to_vec();
            slots.push(rb.slot(
                format!("{buffer}.lse"),
                DType::F32,
                lse_shape,
                SlotInit::NegInf,
            ));
        }
        rb.acc.insert(k.clone(), (bx.clone(), slots, kind));
    }
    rb.acc[&k].1.iter().map(|s| rb.whole(*s)).collect()
}

/// The accumulator of tile `bx` of `buffer` when a contribution to it is skipped because the
/// causal mask hides all of it: created (if the rank has none yet) holding the reduction's
/// identity marked final ([`SlotInit::MaskedZero`], [`SlotInit::MaskedNegInf`]), so that a
/// tile every contribution of which is masked is delivered as 0 (o = 0, lse = -inf) rather
/// than missing; a real contribution later ([`ensure_acc`]) makes it an ordinary one.
pub(crate) fn ensure_masked_acc(rb: &mut RankBuild, buffer: &str, bx: &Region, kind: ReduceKind) {
    if rb.acc.contains_key(&(buffer.to_string(), key(bx))) {
        return;
    }
    for v in ensure_acc(rb, buffer, bx, kind) {
        let init = &mut rb.slots[v.slot].init;
        match init {
            SlotInit::Zero => *init = SlotInit::MaskedZero,
            SlotInit::NegInf => *init = SlotInit::MaskedNegInf,
            _ => {}
        }
    }
}
