//! Reshard patterns: moving a buffer from one placement to another. Levels dropped from the
//! end of one dimension are an AllGather, levels added a local slice, trailing levels moving
//! from one dimension to another an AllToAll; anything else moves point to point exactly the
//! part of its new shard each rank does not hold (never a whole-tensor gather and a slice).

use crate::context::{contains, intersect, link_cost, relative, RankBuild};
use crate::placement::{group_of, shard_box};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{Collective, CommOp, ComputeOp, Region, SlotInit, View};

/// Moves a buffer from one placement to another in stage `stage`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reshard(
    k: &Kernel,
    ranks: &mut [RankBuild],
    mesh: &[usize],
    buffer: &str,
    from: &[Vec<usize>],
    to: &[Vec<usize>],
    stage: usize,
    loc: &Location,
    tag: &mut u64,
) -> Result<(), Diagnostic> {
    let b = k.buffer(buffer).expect("buffer");
    let shape = k.shape(b);
    match pattern(from, to) {
        Pattern::Unchanged => Ok(()),
        Pattern::Coarser(d) => {
            // Coarser along d: AllGather over the dropped (trailing) levels.
            let levels = from[d][to[d].len()..].to_vec();
            let axis = d;
            move_by_collective(
                ranks,
                buffer,
                &shape,
                to,
                mesh,
                stage,
                &levels,
                "gathered",
                &|src, dst| Collective::AllGather { src, dst, axis },
            );
            Ok(())
        }
        Pattern::Finer => {
            // Finer along one dimension: a local slice.
            slice_to(ranks, buffer, &shape, to, mesh, stage);
            Ok(())
        }
        Pattern::TwoDims(d1, d2) => {
            // Trailing levels move from one dimension to the end of another: AllToAll.
            let moved_from = |s: usize, t: usize| -> Option<Vec<usize>> {
                let moved = from[s].strip_prefix(to[s].as_slice())?.to_vec();
                (!moved.is_empty() && to[t].strip_prefix(from[t].as_slice())? == moved.as_slice())
                    .then_some(moved)
            };
            let (src_dim, dst_dim, levels) = match (moved_from(d1, d2), moved_from(d2, d1)) {
                (Some(m), _) => (d1, d2, m),
                (_, Some(m)) => (d2, d1, m),
                _ => return p2p_reshard(ranks, mesh, buffer, &shape, to, stage, loc, tag),
            };
            move_by_collective(
                ranks,
                buffer,
                &shape,
                to,
                mesh,
                stage,
                &levels,
                "a2a",
                &|src, dst| Collective::AllToAll {
                    src,
                    dst,
                    split_axis: dst_dim,
                    concat_axis: src_dim,
                },
            );
            Ok(())
        }
        Pattern::Other => p2p_reshard(ranks, mesh, buffer, &shape, to, stage, loc, tag),
    }
}

/// How a placement changes, per dimension (`from[d]`, `to[d]`: the mesh levels sharding
/// dimension d): the one classification [`reshard`] and [`reshard_moves_data`] share.
enum Pattern {
    /// Every dimension keeps its levels.
    Unchanged,
    /// One dimension drops trailing levels (an AllGather over them).
    Coarser(usize),
    /// One dimension adds trailing levels (a local slice).
    Finer,
    /// Two dimensions change (an AllToAll when trailing levels move from one to the other,
    /// else point to point).
    TwoDims(usize, usize),
    /// Anything else (point to point).
    Other,
}

fn pattern(from: &[Vec<usize>], to: &[Vec<usize>]) -> Pattern {
    let changed: Vec<usize> = (0..from.len()).filter(|d| from[*d] != to[*d]).collect();
    let is_prefix = |a: &[usize], b: &[usize]| b.len() > a.len() && b.starts_with(a);
    match changed.as_slice() {
        [] => Pattern::Unchanged,
        [d] if is_prefix(&to[*d], &from[*d]) => Pattern::Coarser(*d),
        [d] if is_prefix(&from[*d], &to[*d]) => Pattern::Finer,
        [d1, d2] => Pattern::TwoDims(*d1, *d2),
        _ => Pattern::Other,
    }
}

/// Whether a reshard from `from` to `to` sends anything between ranks: false when nothing
/// changes or every rank only slices what it holds.
pub(crate) fn reshard_moves_data(from: &[Vec<usize>], to: &[Vec<usize>]) -> bool {
    !matches!(pattern(from, to), Pattern::Unchanged | Pattern::Finer)
}

/// Any other change of placement, in one stage: every rank receives from the ranks holding
/// parts of its new shard exactly those parts (the nearest holder first, by mesh coordinates)
/// and copies what it holds itself; nothing else moves.
#[allow(clippy::too_many_arguments)]
fn p2p_reshard(
    ranks: &mut [RankBuild],
    mesh: &[usize],
    buffer: &str,
    shape: &[usize],
    to: &[Vec<usize>],
    stage: usize,
    loc: &Location,
    tag: &mut u64,
) -> Result<(), Diagnostic> {
    let held: Vec<(usize, Region)> = ranks.iter().map(|rb| rb.shard[buffer].clone()).collect();
    let mut moved = Vec::with_capacity(ranks.len());
    for r in 0..ranks.len() {
        let newbox = shard_box(shape, to, mesh, &ranks[r].coords);
        let dtype = ranks[r].slots[held[r].0].dtype;
        let dst = ranks[r].slot(
            format!("{buffer}.moved"),
            dtype,
            newbox.extent.clone(),
            SlotInit::Uninit,
        );
        // Itself first, then the others by link distance.
        let mut order: Vec<usize> = (0..ranks.len()).filter(|q| *q != r).collect();
        order.sort_by_key(|q| link_cost(&ranks[r].coords, &ranks[*q].coords));
        order.insert(0, r);
        let mut got: Vec<Region> = Vec::new();
        for q in order {
            let (qslot, qbox) = &held[q];
            let Some(part) = intersect(qbox, &newbox) else {
                continue;
            };
            if got.iter().any(|g| contains(g, &part)) {
                continue;
            }
            if got.iter().any(|g| g.overlaps(&part)) {
                return Err(Diagnostic::error(loc.clone(), format!("reshard of '@{buffer}': the shards of the current placement overlap around {part} (internal error)")));
            }
            let src = View {
                slot: *qslot,
                region: relative(qbox, &part),
            };
            let dst_view = View {
                slot: dst,
                region: relative(&newbox, &part),
            };
            if q == r {
                ranks[r]
                    .stage(stage)
                    .compute
                    .push(ComputeOp::Copy { src, dst: dst_view });
            } else {
                *tag += 1;
                ranks[q].stage(stage).comm.push(CommOp::Send {
                    peer: r,
                    src,
                    tag: *tag,
                });
                ranks[r].stage(stage).comm.push(CommOp::Recv {
                    peer: q,
                    dst: dst_view,
                    tag: *tag,
                });
            }
            got.push(part);
        }
        let have: usize = got.iter().map(Region::numel).sum();
        if have != newbox.numel() {
            return Err(Diagnostic::error(loc.clone(), format!("reshard of '@{buffer}': only {have} of the {} elements of rank {:?}'s new shard are held anywhere", newbox.numel(), ranks[r].coords)));
        }
        moved.push((dst, newbox));
    }
    for (rb, m) in ranks.iter_mut().zip(moved) {
        rb.shard.insert(buffer.to_string(), m);
    }
    Ok(())
}

/// Every rank gets its shard under `to` through one collective over the ranks that differ only
/// on `levels` (ordered by their index over those levels), in stage `stage`.
#[allow(clippy::too_many_arguments)]
fn move_by_collective(
    ranks: &mut [RankBuild],
    buffer: &str,
    shape: &[usize],
    to: &[Vec<usize>],
    mesh: &[usize],
    stage: usize,
    levels: &[usize],
    suffix: &str,
    make: &dyn Fn(View, View) -> Collective,
) {
    for rb in ranks.iter_mut() {
        let (src, _) = rb.shard[buffer].clone();
        let newbox = shard_box(shape, to, mesh, &rb.coords);
        let dst = rb.slot(
            format!("{buffer}.{suffix}"),
            rb.slots[src].dtype,
            newbox.extent.clone(),
            SlotInit::Uninit,
        );
        let group = group_of(mesh, &rb.coords, levels);
        let (src_view, dst_view) = (rb.whole(src), rb.whole(dst));
        rb.stage(stage).comm.push(CommOp::Collective {
            group,
            collective: make(src_view, dst_view),
        });
        rb.shard.insert(buffer.to_string(), (dst, newbox));
    }
}

/// Every rank copies its shard under `to` out of the copy it holds (which must contain it),
/// in stage `stage`.
fn slice_to(
    ranks: &mut [RankBuild],
    buffer: &str,
    shape: &[usize],
    to: &[Vec<usize>],
    mesh: &[usize],
    stage: usize,
) {
    for rb in ranks.iter_mut() {
        let (src, sbox) = rb.shard[buffer].clone();
        let newbox = shard_box(shape, to, mesh, &rb.coords);
        let dst = rb.slot(
            format!("{buffer}.slice"),
            rb.slots[src].dtype,
            newbox.extent.clone(),
            SlotInit::Uninit,
        );
        let src_view = View {
            slot: src,
            region: relative(&sbox, &newbox),
        };
        let dst_view = rb.whole(dst);
        rb.stage(stage).compute.push(ComputeOp::Copy {
            src: src_view,
            dst: dst_view,
        });
        rb.shard.insert(buffer.to_string(), (dst, newbox));
    }
}

/// Stages a reshard from `from` to `to` occupies (so callers can reserve them): none when
/// nothing changes, else one (a collective, a local slice or one round of point-to-point
/// moves).
pub(crate) fn reshard_stages(from: &[Vec<usize>], to: &[Vec<usize>]) -> usize {
    usize::from(from != to)
}
