//! Dead transfer elimination: a point-to-point message whose received values no later op of
//! the receiving rank reads (no compute, no send, no collective, no output piece before the
//! region is overwritten) is dropped, with its send; dropping a send can make the message that
//! brought its values dead in turn (a ring forwards what it received), so this runs to a fixed
//! point.
//!
//! The lowering drops the attention blocks a static mask leaves empty for every batch (a
//! window's band, `causal.rs`); this then drops the K/V pieces no remaining block reads, so a
//! ring under a window shorter than a shard sends its neighbour's piece and nothing else. It
//! runs on plans with such a mask only (`mercury_plan::AttnMask` not empty), so the plans of
//! every other operator are unchanged.
//!
//! Stage semantics (the plan's, `runtime/src/cpu/run.rs`): a stage's sends read at its start,
//! its compute runs in order, its receives and collectives write at its end.

use mercury_plan::verify::{comm_access, compute_access};
use mercury_plan::{CommOp, Plan, Region, View};

/// Whether `a` holds every element of `b` (same slot).
fn covers(a: &View, b: &View) -> bool {
    a.slot == b.slot
        && a.region.offset.len() == b.region.offset.len()
        && (0..a.region.offset.len()).all(|d| {
            a.region.offset[d] <= b.region.offset[d]
                && b.region.offset[d] + b.region.extent[d]
                    <= a.region.offset[d] + a.region.extent[d]
        })
}

fn touches(a: &View, b: &View) -> bool {
    a.slot == b.slot && Region::overlaps(&a.region, &b.region)
}

/// Whether the values rank `r` receives into `dst` at the end of stage `s` are read later:
/// by a send, compute op or collective of a later stage before an op overwrites all of them,
/// or as an output piece.
fn read_later(plan: &Plan, r: usize, s: usize, dst: &View) -> bool {
    let rank = &plan.ranks[r];
    for st in rank.stages.iter().skip(s + 1) {
        for c in &st.comm {
            if let CommOp::Send { src, .. } = c {
                if touches(src, dst) {
                    return true;
                }
            }
        }
        for op in &st.compute {
            let (reads, writes) = compute_access(op);
            if reads.iter().any(|v| touches(v, dst)) {
                return true;
            }
            if writes.iter().any(|w| covers(w, dst)) {
                return false;
            }
        }
        let mut overwritten = false;
        for c in &st.comm {
            if matches!(c, CommOp::Send { .. }) {
                continue;
            }
            let (reads, writes) = comm_access(c);
            if reads.iter().any(|v| touches(v, dst)) {
                return true;
            }
            overwritten |= writes.iter().any(|w| covers(w, dst));
        }
        if overwritten {
            return false;
        }
    }
    rank.outputs.iter().any(|o| touches(&o.src, dst))
}

/// Drops the dead point-to-point messages of `plan` (see the module docs), to a fixed point.
/// Returns the number of messages dropped.
pub(crate) fn drop_dead_transfers(plan: &mut Plan) -> usize {
    let mut dropped = 0;
    loop {
        // (receiver, stage, sender, tag) of every dead message.
        let mut dead = Vec::new();
        for (r, rank) in plan.ranks.iter().enumerate() {
            for (s, st) in rank.stages.iter().enumerate() {
                for c in &st.comm {
                    if let CommOp::Recv { peer, dst, tag } = c {
                        if !read_later(plan, r, s, dst) {
                            dead.push((r, s, *peer, *tag));
                        }
                    }
                }
            }
        }
        if dead.is_empty() {
            return dropped;
        }
        dropped += dead.len();
        for (r, s, from, tag) in dead {
            plan.ranks[r].stages[s].comm.retain(
                |c| !matches!(c, CommOp::Recv { peer, tag: t, .. } if *peer == from && *t == tag),
            );
            if let Some(st) = plan.ranks.get_mut(from).and_then(|x| x.stages.get_mut(s)) {
                st.comm.retain(
                    |c| !matches!(c, CommOp::Send { peer, tag: t, .. } if *peer == r && *t == tag),
                );
            }
        }
    }
}
