//! Reshard patterns: moving a buffer from one placement to another. Levels dropped from the
//! end of one dimension are an AllGather, levels added a local slice, trailing levels moving
//! from one dimension to another an AllToAll; anything else gathers every sharded dimension and
//! slices the target shard.

use crate::context::{relative, shape_of, RankBuild};
use crate::placement::{group_of, shard_box};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{Collective, CommOp, ComputeOp, SlotInit, View};

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
) -> Result<(), Diagnostic> {
    let b = k.buffer(buffer).expect("buffer");
    let shape = k.shape(b);
    let changed: Vec<usize> = (0..from.len()).filter(|d| from[*d] != to[*d]).collect();
    let is_prefix = |a: &[usize], b: &[usize]| b.len() > a.len() && b.starts_with(a);
    match changed.as_slice() {
        [] => Ok(()),
        [d] if is_prefix(&to[*d], &from[*d]) => {
            // Coarser along d: AllGather over the dropped (trailing) levels.
            let levels = from[*d][to[*d].len()..].to_vec();
            let axis = *d;
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
        [d] if is_prefix(&from[*d], &to[*d]) => {
            // Finer along d: a local slice.
            slice_to(ranks, buffer, &shape, to, mesh, stage);
            Ok(())
        }
        [d1, d2] => {
            // Trailing levels move from one dimension to the end of another: AllToAll.
            let moved_from = |s: usize, t: usize| -> Option<Vec<usize>> {
                let moved = from[s].strip_prefix(to[s].as_slice())?.to_vec();
                (!moved.is_empty() && to[t].strip_prefix(from[t].as_slice())? == moved.as_slice())
                    .then_some(moved)
            };
            let (src_dim, dst_dim, levels) = match (moved_from(*d1, *d2), moved_from(*d2, *d1)) {
                (Some(m), _) => (*d1, *d2, m),
                (_, Some(m)) => (*d2, *d1, m),
                _ => return general_reshard(k, ranks, mesh, buffer, from, to, stage, loc),
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
        _ => general_reshard(k, ranks, mesh, buffer, from, to, stage, loc),
    }
}

/// Any other change of placement: gather every sharded dimension, then slice the target
/// shard locally (one AllGather per dimension, in consecutive stages starting at `stage`).
#[allow(clippy::too_many_arguments)]
fn general_reshard(
    k: &Kernel,
    ranks: &mut [RankBuild],
    mesh: &[usize],
    buffer: &str,
    from: &[Vec<usize>],
    to: &[Vec<usize>],
    stage: usize,
    loc: &Location,
) -> Result<(), Diagnostic> {
    let mut cur = from.to_vec();
    let mut st = stage;
    for d in 0..cur.len() {
        if !cur[d].is_empty() {
            let mut next = cur.clone();
            next[d].clear();
            reshard(k, ranks, mesh, buffer, &cur, &next, st, loc)?;
            cur = next;
            st += 1;
        }
    }
    // The slice is local: it runs in the stage after the last gather.
    slice_to(ranks, buffer, &shape_of(k, buffer), to, mesh, st);
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

/// Stages a reshard from `from` to `to` occupies (so callers can reserve them).
pub(crate) fn reshard_stages(from: &[Vec<usize>], to: &[Vec<usize>]) -> usize {
    let changed: Vec<usize> = (0..from.len()).filter(|d| from[*d] != to[*d]).collect();
    let simple = match changed.as_slice() {
        [] => return 0,
        [d] => {
            (to[*d].len() < from[*d].len() && from[*d].starts_with(&to[*d]))
                || (from[*d].len() < to[*d].len() && to[*d].starts_with(&from[*d]))
        }
        [d1, d2] => {
            let mv = |s: usize, t: usize| {
                from[s].strip_prefix(to[s].as_slice()).is_some_and(|m| {
                    !m.is_empty() && to[t].strip_prefix(from[t].as_slice()) == Some(m)
                })
            };
            mv(*d1, *d2) || mv(*d2, *d1)
        }
        _ => false,
    };
    if simple {
        1
    } else {
        from.iter().filter(|l| !l.is_empty()).count() + 1
    }
}
