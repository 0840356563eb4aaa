//! `commir.load`: a tile inside the rank's shard is read in place; a shifted read of a tile it
//! does not hold is received during the previous stage from a rank that holds it then,
//! preferring the peer on the fastest link that used it in that stage (a ring,
//! double-buffered), else its owner.

use crate::compute::StageCx;
use crate::context::{contains, err, intersect, key, link_cost, relative, Event, Lowering};
use crate::order::{positions, Seg};
use crate::placement::shard_holders;
use mercury_commir::Role;
use mercury_ir::{Diagnostic, Location, ValueId};
use mercury_plan::{CommOp, Region, SlotInit, View};
use std::collections::BTreeMap;

impl Lowering<'_> {
    /// Lowers one load event of `cx`'s rank and stage.
    pub(crate) fn lower_load(&mut self, cx: &mut StageCx, e: &Event) -> Result<(), Diagnostic> {
        let Event::Load {
            buffer,
            bx,
            value,
            shifted,
            loc,
        } = e
        else {
            return Ok(());
        };
        let (r, ps) = (cx.r, cx.ps);
        // Every dimension's positions in the buffer: a dimension's real first position where
        // they are one run, else `None`. A causal mask reads the last two of a tile
        // computed from this one (a key dimension that is a tile's last, e.g. K stored
        // transposed, was masked at the rank's order offset under a zigzag placement: relative
        // error 0.4, exit 0; ninth new-user pass, 2026-12-03).
        let mut segs: Vec<Vec<Seg>> = (0..bx.rank())
            .map(|d| positions(self.orders.of(buffer, d), bx.offset[d], bx.extent[d]))
            .collect();
        let pos: Vec<Option<usize>> = segs
            .iter()
            .map(|s| match s.as_slice() {
                [one] => Some(one.pos),
                _ => None,
            })
            .collect();
        // Attention tiles are [b, h, s, d] or [h, s, d] (the verifier checks the layout): the
        // sequence is the second dimension from the end.
        if let Some(d) = bx.rank().checked_sub(2) {
            if pos[d].is_none() {
                cx.scattered.insert(*value);
            }
            cx.seq.insert(*value, segs.swap_remove(d));
        }
        cx.positions.insert(*value, pos);
        if self.k.buffer(buffer).map(|b| b.role) == Some(Role::Temp) {
            return self.load_temp(cx, buffer, bx, *value, loc);
        }
        let (slot, sb) = self.ranks[r]
            .shard
            .get(buffer)
            .cloned()
            .ok_or_else(|| err(loc, format!("rank {r} holds no part of '@{buffer}'")))?;
        if contains(&sb, bx) {
            cx.values.insert(
                *value,
                View {
                    slot,
                    region: relative(&sb, bx),
                },
            );
            return Ok(());
        }
        if !*shifted {
            return Err(err(
                loc,
                format!("rank {r} reads '@{buffer}' {bx} which it does not hold"),
            ));
        }
        // Already received for this stage (another load of the same tile)?
        if let Some((rb, rs)) = self.ranks[r]
            .received
            .get(&(ps, buffer.clone()))
            .and_then(|v| v.iter().find(|(b, _)| contains(b, bx)).cloned())
        {
            cx.values.insert(
                *value,
                View {
                    slot: rs,
                    region: relative(&rb, bx),
                },
            );
            return Ok(());
        }
        let Some((q, src)) = self.ring_source(cx, buffer, bx) else {
            return Err(err(loc, format!("rank {r} needs '@{buffer}' {bx} at stage {ps}, but no rank holds it in the stage before")));
        };
        let prev = ps - 1;
        let parity = ps % 2;
        let kth = cx.remote_count.entry(buffer.clone()).or_default();
        let key_ring = (buffer.clone(), parity, *kth);
        *kth += 1;
        let dtype = self.ranks[q].slots[src.slot].dtype;
        let rs = match self.ranks[r].ring.get(&key_ring) {
            Some(s) if self.ranks[r].slots[*s].shape == bx.extent => *s,
            _ => {
                let s = self.ranks[r].slot(
                    format!("{buffer}.ring{parity}.{}", key_ring.2),
                    dtype,
                    bx.extent.clone(),
                    SlotInit::Uninit,
                );
                self.ranks[r].ring.insert(key_ring, s);
                s
            }
        };
        let tag = self.next_tag();
        self.ranks[q]
            .stage(prev)
            .comm
            .push(CommOp::Send { peer: r, src, tag });
        let dst = self.ranks[r].whole(rs);
        self.ranks[r].stage(prev).comm.push(CommOp::Recv {
            peer: q,
            dst: dst.clone(),
            tag,
        });
        let list = self.ranks[r]
            .received
            .entry((ps, buffer.clone()))
            .or_default();
        list.push((bx.clone(), rs));
        let pos = list.len() - 1;
        self.holders
            .received
            .entry((ps, buffer.clone()))
            .or_default()
            .insert(bx, r, pos);
        cx.values.insert(*value, dst);
        Ok(())
    }

    /// A read of a `temp` buffer: temporaries live on the rank that writes them, so the rank
    /// must have stored the tile (or one containing it) earlier in program order.
    fn load_temp(
        &mut self,
        cx: &mut StageCx,
        buffer: &str,
        bx: &Region,
        value: ValueId,
        loc: &Location,
    ) -> Result<(), Diagnostic> {
        let r = cx.r;
        // The tile's last store was skipped: so is this load (and all computed from it).
        if self.ranks[r]
            .skipped
            .iter()
            .any(|((b, _), sb)| b == buffer && contains(sb, bx))
        {
            cx.mask_out(value);
            return Ok(());
        }
        let held = self.ranks[r]
            .stored
            .iter()
            .find(|((b, _), (sb, _))| b == buffer && contains(sb, bx))
            .map(|(_, (sb, s))| (sb.clone(), *s));
        let Some((sb, slot)) = held else {
            // Stored, but in tiles none of which holds the whole read.
            let parts: Vec<String> = self.ranks[r]
                .stored
                .iter()
                .filter(|((b, _), (sb, _))| b == buffer && intersect(sb, bx).is_some())
                .map(|(_, (sb, _))| sb.to_string())
                .collect();
            if !parts.is_empty() {
                return Err(err(
                    loc,
                    format!("rank {r} reads {bx} of the temp buffer '@{buffer}', which no one tile it stored holds (it stored {}): a load of a temp reads inside one stored tile; load it by the tiles it was stored in, or store it whole", parts.join(", ")),
                ));
            }
            return Err(err(
                loc,
                format!("rank {r} reads {bx} of the temp buffer '@{buffer}' before it stores it: a temp buffer is read only where the same rank has stored that tile earlier"),
            ));
        };
        cx.values.insert(
            value,
            View {
                slot,
                region: relative(&sb, bx),
            },
        );
        Ok(())
    }

    /// The rank (and its view) that sends tile `bx` of `buffer` to `cx`'s rank during the
    /// stage before: among the ranks holding it then (as their shard or as a tile received for
    /// that stage), the one on the fastest link, then one that used the tile in that stage,
    /// then a receiver over the owner, then the nearest along the ring. The holders come from
    /// the compute stages' index (`Holders`), so the cost follows the number of holders, not
    /// the number of ranks.
    fn ring_source(&mut self, cx: &StageCx, buffer: &str, bx: &Region) -> Option<(usize, View)> {
        let (r, n) = (cx.r, self.n);
        let prev = cx.ps - 1;
        let ranks = &self.ranks;
        // Candidates (rank, 1 for its shard or 0 for a tile it received, view); every
        // candidate's preference below is distinct, so their order does not matter.
        let mut cands: Vec<(usize, usize, View)> = Vec::new();
        let owners = self
            .holders
            .shards
            .entry((buffer.to_string(), key(bx)))
            .or_insert_with(|| shard_holders(ranks, buffer, bx));
        for &q in owners.iter().filter(|q| **q != r) {
            let (qs, qb) = &ranks[q].shard[buffer];
            cands.push((
                q,
                1,
                View {
                    slot: *qs,
                    region: relative(qb, bx),
                },
            ));
        }
        let at = (prev, buffer.to_string());
        if let Some(index) = self.holders.received.get(&at) {
            // Per rank, the first of its tiles received for that stage that contains `bx`.
            let mut first: BTreeMap<usize, usize> = BTreeMap::new();
            for (q, pos) in index.containing(bx).into_iter().filter(|(q, _)| *q != r) {
                let p = first.entry(q).or_insert(pos);
                *p = (*p).min(pos);
            }
            for (q, pos) in first {
                let (rb, rs) = &ranks[q].received[&at][pos];
                cands.push((
                    q,
                    0,
                    View {
                        slot: *rs,
                        region: relative(rb, bx),
                    },
                ));
            }
        }
        let mut best: Option<((usize, usize, usize, usize), usize, View)> = None;
        for (q, owner_rank, view) in cands {
            // Trace stage `prev - base` (none: the prologue) of rank q.
            let used_prev = self.stage_events(q, prev - cx.base).iter().any(|(_, ev)| matches!(ev, Event::Load { buffer: b2, bx: x2, .. } if b2 == buffer && contains(x2, bx)));
            let (fast, ndiff) = link_cost(&ranks[r].coords, &ranks[q].coords);
            let pref = (
                fast,
                ndiff,
                usize::from(!used_prev) * 2 + owner_rank,
                (q + n - r) % n,
            );
            if best.as_ref().is_none_or(|(p, _, _)| pref < *p) {
                best = Some((pref, q, view));
            }
        }
        best.map(|(_, q, v)| (q, v))
    }
}
