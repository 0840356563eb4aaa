//! The end of the compute: partial results of one output tile held by several ranks are
//! combined by AllReduce, or ReduceScatter when the output is sharded over those ranks, or one
//! Reduce per owner when only some of them own parts of the tile; then
//! the reshards at the kernel's end move the finished outputs (a finished f32 tile of a bf16
//! output is cast to bf16 first: Ulysses' and USP's output all-to-all carry half the bytes).

use crate::context::{
    combine_kind, contains, err, intersect, key, relative, shape_of, Lowering, RankBuild,
};
use crate::placement::{group_of, shard_box};
use crate::prologue::ReshardAt;
use crate::reshard::{reshard, reshard_moves_data, reshard_stages};
use mercury_commir::{Kernel, ReduceKind, Stmt};
use mercury_ir::Diagnostic;
use mercury_plan::{
    coords_of, Collective, CombineKind, CommOp, ComputeOp, DType, PatchKind, Region, SlotInit, View,
};
use std::collections::{BTreeMap, HashMap};

impl Lowering<'_> {
    /// Combines partial results of the same tile held by several ranks (AllReduce, rewritten
    /// to ReduceScatter where the output is sharded over the group, or to a Reduce per owner
    /// where the tile's owners are some of the group: [`reduce_where_owned`]), each tile in
    /// the stage after the last one that touches its accumulator on any holder
    /// ([`finished_at`]): a tile finished early is combined while later tiles compute (a
    /// GEMM reduce-scatter tiled along M overlaps each tile's reduce with the next tile's
    /// GEMM). Returns the first stage after every stage used, combines included.
    pub(crate) fn combine_partials(&mut self) -> usize {
        let k = self.k;
        let mut epi = self.last_plan_stage() + 1;
        // Tile -> the ranks holding an accumulator of it, in increasing order.
        let mut holders: BTreeMap<(String, Vec<usize>), Vec<usize>> = BTreeMap::new();
        for (r, rb) in self.ranks.iter().enumerate() {
            for key in rb.acc.keys() {
                holders.entry(key.clone()).or_default().push(r);
            }
        }
        let mut last_combine = None;
        let mut all_reduces = Vec::new();
        for ((buffer, kk), all) in &holders {
            let levels = self.red_levels.get(buffer).cloned().unwrap_or_default();
            if levels.is_empty() {
                continue;
            }
            // Every holder combines the tile in the same stage (the executors match a
            // stage's collectives in order): the first after its last use on any of them.
            let tile_key = (buffer.clone(), kk.clone());
            let epi = all
                .iter()
                .map(|&r| finished_at(&self.ranks[r], &self.ranks[r].acc[&tile_key].1))
                .max()
                .flatten()
                .map_or(epi, |s| s + 1);
            for &r in all {
                let me = coords_of(&self.mesh, r);
                let group: Vec<usize> = group_of(&self.mesh, &me, &levels)
                    .into_iter()
                    .filter(|q| all.binary_search(q).is_ok())
                    .collect();
                if group.len() < 2 {
                    continue;
                }
                last_combine = last_combine.max(Some(epi));
                let (_, slots, kind) = self.ranks[r].acc[&(buffer.clone(), kk.clone())].clone();
                let bufs: Vec<View> = slots.iter().map(|s| self.ranks[r].whole(*s)).collect();
                if kind == ReduceKind::Add {
                    all_reduces.push(Reduction {
                        r,
                        si: epi,
                        ops: vec![self.ranks[r].stage(epi).comm.len()],
                        group: group.clone(),
                        buffer: buffer.clone(),
                        tile: kk.clone(),
                        src: slots[0],
                        dst: None,
                        sum: Sum::AllReduce,
                    });
                }
                self.ranks[r].stage(epi).comm.push(CommOp::Collective {
                    group,
                    collective: Collective::AllReduce {
                        bufs,
                        kind: combine_kind(kind),
                    },
                });
            }
        }
        if let Some(last) = last_combine {
            epi = epi.max(last + 1);
        }
        let reductions =
            reduce_where_owned(k, &mut self.ranks, &self.placement, &self.mesh, all_reduces);
        bf16_partial_sums(k, &mut self.ranks, &reductions);
        epi
    }

    /// Kept log-sum-exps (`commir.reduce lse_merge ... into @O lse @L`): once the partial
    /// results are combined, each rank's merged log-sum-exp accumulator of an `@O` tile is its
    /// finished tile of `@L` (the box without its last dimension; `@L`'s dimensions are bound
    /// to `@O`'s axes, so they share the lowering's orders), which the end reshards and the
    /// delivery move like any output's.
    pub(crate) fn keep_lse(&mut self) {
        let mut kept: Vec<(String, String)> = Vec::new();
        self.k.walk(&mut |s, _| {
            if let Stmt::Reduce {
                access,
                lse: Some(l),
                ..
            } = s
            {
                kept.push((access.buffer.clone(), l.buffer.clone()));
            }
        });
        if kept.is_empty() {
            return;
        }
        for rb in &mut self.ranks {
            let tiles: Vec<_> = rb
                .acc
                .iter()
                .filter_map(|((o, _), (bx, slots, kind))| {
                    let (_, l) = kept.iter().find(|(out, _)| out == o)?;
                    let lse = *slots.get(1).filter(|_| *kind == ReduceKind::LseMerge)?;
                    let n = bx.rank().checked_sub(1)?;
                    let lb = Region {
                        offset: bx.offset[..n].to_vec(),
                        extent: bx.extent[..n].to_vec(),
                    };
                    Some(((l.clone(), key(&lb)), (lb, vec![lse], ReduceKind::LseMerge)))
                })
                .collect();
            rb.acc.extend(tiles);
        }
    }

    /// The reshards at the kernel's end, from stage `epi` on: every rank must hold exactly its
    /// shard of the current placement (slicing what it holds beyond it first, and casting a
    /// finished f32 tile of a bf16 output to bf16, in one copy a stage before the move).
    /// Returns the first stage after them.
    pub(crate) fn end_reshards(
        &mut self,
        end: &[ReshardAt],
        mut epi: usize,
    ) -> Result<usize, Diagnostic> {
        let k = self.k;
        for (buffer, to_placement, loc) in end {
            let from = self.placement[buffer].clone();
            let shape = shape_of(k, buffer);
            // A placement the lowering's orders do not align (contiguous after a zigzag
            // compute, say) is reached by the final delivery, point to point.
            self.real_placement
                .insert(buffer.clone(), to_placement.clone());
            if !self
                .orders
                .aligned(buffer, to_placement, &shape, &self.mesh)
            {
                continue;
            }
            let to = &to_placement.levels;
            // A collective move needs every rank to hold its shard of the current placement;
            // when the schedule left the output elsewhere, the final delivery moves it point
            // to point.
            let mesh = &self.mesh;
            let holds_shard = self.ranks.iter().all(|rb| {
                let mine = shard_box(&shape, &from, mesh, &rb.coords);
                finished_tiles(rb, buffer).any(|(_, bx, _, _)| contains(&bx, &mine))
            });
            if !holds_shard {
                self.placement.insert(buffer.clone(), to.clone());
                continue;
            }
            // A finished f32 tile of a bf16 output (an accumulator, or a reduce-scatter's
            // result) travels as bf16: the cast the delivery would make after the move, made
            // before it (the same values, half the bytes). A reshard that sends nothing (the
            // same placement, or a local slice) keeps the tile as it is: the cast would only
            // add a copy and a stage. f16 stays f32: the executors' copies convert
            // f32 <-> bf16 only.
            let out_dtype = k.buffer(buffer).map(|b| crate::context::to_dtype(&b.dtype));
            let narrow = (out_dtype == Some(DType::BF16) && reshard_moves_data(&from, to))
                .then_some(DType::BF16);
            let mut sliced = false;
            for rb in self.ranks.iter_mut() {
                let mine = shard_box(&shape, &from, mesh, &rb.coords);
                let held = finished_tiles(rb, buffer).find(|(_, bx, _, _)| contains(bx, &mine));
                let Some((kk, bx, slot, is_acc)) = held else {
                    return Err(err(loc, format!("reshard of '@{buffer}' at the end: rank {:?} does not hold its shard {mine} of the current placement", rb.coords)));
                };
                if is_acc {
                    rb.acc.remove(&kk);
                } else {
                    rb.stored.remove(&kk);
                }
                let cast = narrow.filter(|_| rb.slots[slot].dtype == DType::F32);
                if bx == mine && cast.is_none() {
                    rb.shard.insert(buffer.clone(), (slot, bx));
                } else {
                    sliced = true;
                    slice_held(rb, buffer, slot, &bx, mine, cast, epi);
                }
            }
            // The slices (if any) run in stage `epi`; the move starts after them.
            if sliced {
                epi += 1;
            }
            reshard(
                k,
                &mut self.ranks,
                &self.mesh,
                buffer,
                &from,
                to,
                epi,
                loc,
                &mut self.tag,
            )?;
            for rb in self.ranks.iter_mut() {
                let (slot, bx) = rb.shard[buffer].clone();
                rb.stored.insert((buffer.clone(), key(&bx)), (bx, slot));
            }
            self.placement.insert(buffer.clone(), to.clone());
            epi += reshard_stages(&from, to);
        }
        Ok(epi)
    }
}

/// The last stage of `rb` whose ops (compute or comm) read or write any of `slots`, `None`
/// when none does: from the stage after it the slots hold their final values and nothing
/// else on the rank touches them, so a collective over them there runs beside that stage's
/// other work without a conflict (the plan verifier checks it).
fn finished_at(rb: &RankBuild, slots: &[usize]) -> Option<usize> {
    let touches = |views: (Vec<&View>, Vec<&View>)| {
        views
            .0
            .iter()
            .chain(&views.1)
            .any(|v| slots.contains(&v.slot))
    };
    rb.stages
        .iter()
        .rev()
        .find(|(_, st)| {
            st.compute
                .iter()
                .any(|op| touches(mercury_plan::verify::compute_access(op)))
                || st
                    .comm
                    .iter()
                    .any(|op| touches(mercury_plan::verify::comm_access(op)))
        })
        .map(|(s, _)| *s)
}

/// The finished tiles of `buffer` a rank holds: (key, box, slot, is an accumulator), the
/// accumulators first.
fn finished_tiles<'a>(
    rb: &'a RankBuild,
    buffer: &'a str,
) -> impl Iterator<Item = ((String, Vec<usize>), Region, usize, bool)> + 'a {
    rb.acc
        .iter()
        .filter(move |((b, _), _)| b == buffer)
        .map(|(kk, (bx, slots, _))| (kk.clone(), bx.clone(), slots[0], true))
        .chain(
            rb.stored
                .iter()
                .filter(move |((b, _), _)| b == buffer)
                .map(|(kk, (bx, s))| (kk.clone(), bx.clone(), *s, false)),
        )
}

/// Copies the rank's shard `mine` of `buffer` out of `slot` (holding `bx`) in stage `stage`,
/// converted to `cast` when given; the copy becomes the rank's shard. For a rank holding more
/// than its shard (e.g. after an all-reduce; the copy is `{buffer}.slice`), or a finished f32
/// tile of a bf16 output (an accumulator, a reduce-scatter's result, a stored tile) narrowed
/// before it moves (`{buffer}.narrow` when the copy only converts).
fn slice_held(
    rb: &mut RankBuild,
    buffer: &str,
    slot: usize,
    bx: &Region,
    mine: Region,
    cast: Option<DType>,
    stage: usize,
) {
    // A copy that only converts is a narrowing (as the delivery names its casts).
    let what = if cast.is_some() && *bx == mine {
        "narrow"
    } else {
        "slice"
    };
    let dst = rb.slot(
        format!("{buffer}.{what}"),
        cast.unwrap_or(rb.slots[slot].dtype),
        mine.extent.clone(),
        SlotInit::Uninit,
    );
    let (src_view, dst_view) = (
        View {
            slot,
            region: relative(bx, &mine),
        },
        rb.whole(dst),
    );
    rb.stage(stage).compute.push(ComputeOp::Copy {
        src: src_view,
        dst: dst_view,
    });
    rb.shard.insert(buffer.to_string(), (dst, mine));
}

/// Reduction levels per output buffer: parallel loops around its reductions whose axis the
/// output does not use, or uses only inside a shifted index. Ranks that differ only there hold different partial results; ranks
/// that differ elsewhere hold copies of the same result.
///
/// All reductions into one buffer share one accumulator per tile, combined over one set of
/// levels, so they must all be reduced over the same levels. Two that are not (a product
/// split over level 0 and another over level 1, or one inside a parallel loop and one outside
/// it) would have each partial added once per replica on the other levels: refused, at the
/// second reduction, naming the first.
pub(crate) fn reduction_levels(k: &Kernel) -> Result<HashMap<String, Vec<usize>>, Diagnostic> {
    let mut red_levels: HashMap<String, (Vec<usize>, mercury_ir::Location)> = HashMap::new();
    let mut refused = None;
    k.walk(&mut |s, stack| {
        let Stmt::Reduce { access, .. } = s else {
            return;
        };
        if refused.is_some() {
            return;
        }
        let b = k.buffer(&access.buffer).expect("buffer");
        // A parallel axis the output uses keeps ranks' partials apart only where the index
        // is that axis alone: under a shifted index (`(@j1 + @i1) mod 2`, @i1 sequential) a
        // rank writes a different tile on each iteration, so ranks that differ on the axis's
        // level meet on the same tiles and their partials must be combined.
        let apart = |axis: &str| {
            b.uses_axis(axis)
                && access
                    .indices
                    .iter()
                    .filter(|e| e.axes().contains(&axis))
                    .all(|e| e.as_axis() == Some(axis))
        };
        let mut here: Vec<usize> = stack
            .iter()
            .filter(|l| !apart(&l.axis))
            .filter_map(|l| l.parallel)
            .collect();
        here.sort_unstable();
        here.dedup();
        match red_levels.get(&access.buffer) {
            None => {
                red_levels.insert(access.buffer.clone(), (here, access.loc.clone()));
            }
            Some((first, at)) if *first != here => {
                refused = Some(err(
                    &access.loc,
                    format!(
                        "this reduction into '@{}' is combined over mesh levels {} but the one at {} over {}: \
                         one accumulator cannot combine both (each partial would be added once per replica \
                         on the other levels); reduce into separate outputs, or parallelize both over the same levels",
                        access.buffer,
                        show_levels(&here),
                        at,
                        show_levels(first),
                    ),
                ));
            }
            Some(_) => {}
        }
    });
    match refused {
        Some(e) => Err(e),
        None => Ok(red_levels.into_iter().map(|(b, (l, _))| (b, l)).collect()),
    }
}

/// `{0, 1}`, or `{}` (not split: every rank computes the whole sum).
fn show_levels(levels: &[usize]) -> String {
    let l: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
    format!("{{{}}}", l.join(", "))
}

/// What a sum of partial results over ranks became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sum {
    /// In place: every member ends with the whole sum.
    AllReduce,
    /// Every member keeps its shard of the tile.
    ReduceScatter,
    /// One reduce per owner of a part of the tile: each owner receives its part only.
    Reduce,
}

/// One sum of partial results over ranks, as rank `r` takes part in it: its collectives `ops`
/// (positions in stage `si`'s comm list: one all-reduce or reduce-scatter, or one reduce per
/// owner of the tile) over `group`, of tile `tile` of `buffer`, from accumulator slot `src`;
/// `dst` is the slot the rank's part of the sum lands in (a reduce-scatter's shard, the part a
/// reduce's root owns: the accumulator `src` itself when the root owns the whole tile), `None`
/// for an all-reduce (in place) or a member of reduces that owns no part of the tile.
struct Reduction {
    r: usize,
    si: usize,
    ops: Vec<usize>,
    group: Vec<usize>,
    buffer: String,
    tile: Vec<usize>,
    src: usize,
    dst: Option<usize>,
    sum: Sum,
}

/// Rewrites the AllReduce(add) of each tile (`all_reduces`, one per member, made by
/// [`Lowering::combine_partials`]) where the output's placement lets its members keep less
/// than the whole sum, and returns every sum with its final collectives:
///
/// - the tile is cut into disjoint parts by the shards of members of the group ([`owned_parts`]);
///   then when every member owns one part and the parts lie side by side along one dimension
///   ([`scatter_order`]: a tile of whole shards, or a row tile of a column-sharded output),
///   one ReduceScatter: each rank keeps only its part;
/// - else one Reduce per owner (some members own no part: a tile of rows over fewer shards
///   than the group has members, or inside one shard): each owner receives the sum of its
///   part only, the other members only send (half an all-reduce's bytes: (n - 1) x the tile
///   over the group instead of 2 (n - 1));
/// - else (a replicated output, replicas inside the group, or a part no member owns) the
///   AllReduce stays.
///
/// The choice depends only on the group, the tile and the placement, so every member makes
/// it alike and writes the same collectives in the same order (reduces in group order of
/// their roots), which is how the executors match them.
fn reduce_where_owned(
    k: &Kernel,
    ranks: &mut [RankBuild],
    placement: &HashMap<String, Vec<Vec<usize>>>,
    mesh: &[usize],
    all_reduces: Vec<Reduction>,
) -> Vec<Reduction> {
    // (rank, stage, position of the all-reduce) -> the collectives replacing it.
    let mut replace: HashMap<(usize, usize, usize), Vec<CommOp>> = HashMap::new();
    let mut made = Vec::with_capacity(all_reduces.len());
    for mut red in all_reduces {
        let r = red.r;
        let acc_key = (red.buffer.clone(), red.tile.clone());
        let Some((bx, slots, kind)) = ranks[r].acc.get(&acc_key).cloned() else {
            made.push(red);
            continue;
        };
        if kind != ReduceKind::Add || slots.len() != 1 {
            made.push(red);
            continue;
        }
        let buffer = red.buffer.clone();
        let sh = &placement[&buffer];
        let shape = shape_of(k, &buffer);
        let acc_view = View {
            slot: slots[0],
            region: Region::full(&bx.extent),
        };
        let ci = red.ops[0];
        let parts = owned_parts(&shape, ranks, sh, mesh, &bx, &red.group);
        if let Some((ordered, d)) = parts
            .as_deref()
            .and_then(|p| scatter_order(p, &red.group, &bx))
        {
            // The rank's output tile is its part, in the scatter destination.
            let (_, mine) = parts
                .as_deref()
                .and_then(|p| p.iter().find(|(q, _)| red.group[*q] == r))
                .cloned()
                .expect("every member owns a part of a reduce-scatter");
            let dst = ranks[r].slot(
                format!("{buffer}.rs"),
                DType::F32,
                mine.extent.clone(),
                SlotInit::Uninit,
            );
            let dst_view = ranks[r].whole(dst);
            replace.insert(
                (r, red.si, ci),
                vec![CommOp::Collective {
                    group: ordered.clone(),
                    collective: Collective::ReduceScatter {
                        src: acc_view,
                        dst: dst_view,
                        axis: d,
                        kind: CombineKind::Add,
                    },
                }],
            );
            ranks[r].acc.remove(&acc_key);
            ranks[r]
                .stored
                .insert((buffer.clone(), key(&mine)), (mine, dst));
            red.group = ordered;
            red.dst = Some(dst);
            red.sum = Sum::ReduceScatter;
        } else if let Some(parts) = parts {
            let mut ops = Vec::with_capacity(parts.len());
            let whole_tile = parts.len() == 1;
            for (root, part) in parts {
                let dst = (red.group[root] == r).then(|| {
                    // A tile with one owner is summed in place on it (no second slot of the
                    // tile's size); several owners each get a slot for their part.
                    let dst = if whole_tile {
                        slots[0]
                    } else {
                        ranks[r].slot(
                            format!("{buffer}.reduced"),
                            DType::F32,
                            part.extent.clone(),
                            SlotInit::Uninit,
                        )
                    };
                    // The rank's output tile is now its part, in the reduce's destination.
                    ranks[r]
                        .stored
                        .insert((buffer.clone(), key(&part)), (part.clone(), dst));
                    red.dst = Some(dst);
                    dst
                });
                ops.push(CommOp::Collective {
                    group: red.group.clone(),
                    collective: Collective::Reduce {
                        src: View {
                            slot: slots[0],
                            region: relative(&bx, &part),
                        },
                        dst: dst.map(|d| ranks[r].whole(d)),
                        root,
                        kind: CombineKind::Add,
                    },
                });
            }
            // The accumulator holds this rank's partial sum only: no finished tile any more.
            ranks[r].acc.remove(&acc_key);
            replace.insert((r, red.si, ci), ops);
            red.sum = Sum::Reduce;
        }
        made.push(red);
    }
    // Splice the replacements in; every sum's positions follow its collectives.
    let mut moved: HashMap<(usize, usize, usize), Vec<usize>> = HashMap::new();
    let mut touched: Vec<(usize, usize)> = replace.keys().map(|(r, si, _)| (*r, *si)).collect();
    touched.sort_unstable();
    touched.dedup();
    for (r, si) in touched {
        let st = ranks[r].stages.get_mut(&si).expect("stage of a collective");
        let old = std::mem::take(&mut st.comm);
        for (ci, op) in old.into_iter().enumerate() {
            let at = st.comm.len();
            match replace.remove(&(r, si, ci)) {
                Some(ops) => {
                    moved.insert((r, si, ci), (at..at + ops.len()).collect());
                    st.comm.extend(ops);
                }
                None => {
                    moved.insert((r, si, ci), vec![at]);
                    st.comm.push(op);
                }
            }
        }
    }
    for red in &mut made {
        if let Some(ops) = moved.get(&(red.r, red.si, red.ops[0])) {
            red.ops = ops.clone();
        }
    }
    made
}

/// The group of a reduce-scatter of tile `bx`, in the order of its chunks, and the dimension
/// `d` it scatters along, from the tile's owned parts (`parts`, [`owned_parts`]: disjoint and
/// covering the tile): when every member of `group` owns one part, the parts have one extent
/// along `d` and the tile's whole extent along every other dimension, the sum is one
/// reduce-scatter of the tile along `d` (chunk i to the owner of the i-th part) instead of a
/// reduce per owner. This covers a tile of whole shards (Megatron's reduce-scatter of C) and a
/// tile cut across the shards (a row tile of a column-sharded C). `None` otherwise. A property
/// of (group, tile), so every member decides alike.
fn scatter_order(
    parts: &[(usize, Region)],
    group: &[usize],
    bx: &Region,
) -> Option<(Vec<usize>, usize)> {
    if parts.len() != group.len() || group.len() < 2 {
        return None;
    }
    let first = &parts[0].1;
    let dims: Vec<usize> = (0..bx.extent.len())
        .filter(|d| first.extent[*d] < bx.extent[*d])
        .collect();
    let [d] = dims[..] else {
        return None;
    };
    let alike = parts.iter().all(|(_, part)| {
        (0..bx.extent.len()).all(|e| {
            if e == d {
                part.extent[e] == first.extent[e]
            } else {
                part.extent[e] == bx.extent[e]
            }
        })
    });
    if !alike {
        return None;
    }
    let mut by_offset: Vec<&(usize, Region)> = parts.iter().collect();
    by_offset.sort_by_key(|(_, part)| part.offset[d]);
    Some((by_offset.iter().map(|(q, _)| group[*q]).collect(), d))
}

/// The parts of tile `bx` (of a buffer of `shape` placed `sh`) that members of `group` own, as
/// (position in the group, part in the buffer's coordinates), in group order: each member's
/// shard cut to the tile, where it meets it. `Some` when these parts are disjoint and cover the
/// tile (each element has exactly one owner in the group, so one reduce per part leaves every
/// element of the sum with its owner); `None` when a member's shard repeats another's (a
/// replicated output, or replicas in the group) or some part has no owner in the group. A
/// property of (group, tile), so every member decides alike.
fn owned_parts(
    shape: &[usize],
    ranks: &[RankBuild],
    sh: &[Vec<usize>],
    mesh: &[usize],
    bx: &Region,
    group: &[usize],
) -> Option<Vec<(usize, Region)>> {
    let parts: Vec<(usize, Region)> = group
        .iter()
        .enumerate()
        .filter_map(|(p, q)| {
            let shard = shard_box(shape, sh, mesh, &ranks[*q].coords);
            intersect(bx, &shard).map(|part| (p, part))
        })
        .collect();
    let disjoint = parts
        .iter()
        .enumerate()
        .all(|(i, (_, a))| parts[..i].iter().all(|(_, b)| !a.overlaps(b)));
    let covered: usize = parts.iter().map(|(_, part)| part.numel()).sum();
    (!parts.is_empty() && disjoint && covered == bx.numel()).then_some(parts)
}

/// Partial sums travel in [`crate::context::partial_sum_dtype`] (bf16 for a bf16 output):
/// a reduce-scatter's, reduce's or all-reduce's accumulator becomes a bf16 slot that its GEMM
/// writes directly (f32 accumulation inside the GEMM, one rounding at its end, no cast
/// kernel), and a reduce-scatter's or reduce's result is bf16. The combine itself accumulates
/// in f32 on the copy transport; NCCL reduce-scatters, reduces and all-reduces bf16 in its own
/// reduction (one rounding per step of its ring, as in the baseline).
///
/// For reduces the members decide per tile: every member's one record covers all the reduces
/// of the tile (one per owner), so the sources of one reduce, and the root's destination, are
/// all bf16 or all f32.
///
/// Only where that is the same computation up to the rounding of each rank's partial sum:
/// on every member of the collective the accumulator is written by exactly one op, a GEMM
/// without an epilogue over the whole accumulator with bf16 operands
/// ([`mercury_plan::patch::gemm_writes`]), into its zero initial value, before the
/// collective; before it nothing else reads it, and after it nothing writes it (an
/// all-reduce's result is then read where it lies). Otherwise (several GEMMs summing into it,
/// a combine, an attention merge) every member keeps f32, as the members of one collective
/// must agree.
fn bf16_partial_sums(k: &Kernel, ranks: &mut [RankBuild], reductions: &[Reduction]) {
    let eligible = |s: &Reduction| -> Option<(usize, usize)> {
        if crate::context::partial_sum_dtype(k, &s.buffer, ReduceKind::Add) != DType::BF16 {
            return None;
        }
        let rb = &ranks[s.r];
        let slot = &rb.slots[s.src];
        if slot.dtype != DType::F32 || slot.init != SlotInit::Zero {
            return None;
        }
        let whole = rb.whole(s.src);
        let mut writer = None;
        for (si, st) in &rb.stages {
            for (ci, op) in st.compute.iter().enumerate() {
                let (reads, writes) = mercury_plan::verify::compute_access(op);
                let w = writes.iter().any(|v| v.slot == s.src);
                let rd = reads.iter().any(|v| v.slot == s.src);
                if !w && (!rd || *si > s.si) {
                    continue;
                }
                // A GEMM without an epilogue over the whole accumulator that can write bf16
                // from its operands (not from f32 ones).
                let gemm = matches!(op, ComputeOp::Patch { patch: PatchKind::Gemm { epilogue: None, .. }, inputs, outputs } if outputs.len() == 1 && outputs[0] == whole
                    && inputs.iter().all(|a| mercury_plan::patch::gemm_writes(rb.slots[a.slot].dtype, DType::BF16)));
                if !gemm || writer.is_some() || *si >= s.si {
                    return None;
                }
                writer = Some((*si, ci));
            }
            for (ci, op) in st.comm.iter().enumerate() {
                if *si == s.si && s.ops.contains(&ci) {
                    continue;
                }
                let (reads, writes) = mercury_plan::verify::comm_access(op);
                let w = writes.iter().any(|v| v.slot == s.src);
                let rd = reads.iter().any(|v| v.slot == s.src);
                if w || (rd && *si <= s.si) {
                    return None;
                }
            }
        }
        writer
    };
    // Members of one collective (stage, group, buffer, tile) decide together.
    type Member = (usize, Option<(usize, usize)>);
    let mut groups: BTreeMap<(usize, &[usize], &str, &[usize]), Vec<Member>> = BTreeMap::new();
    for (i, s) in reductions.iter().enumerate() {
        groups
            .entry((s.si, &s.group, &s.buffer, &s.tile))
            .or_default()
            .push((i, eligible(s)));
    }
    for ((_, group, _, _), members) in groups {
        let writers: Option<Vec<(usize, (usize, usize))>> = members
            .into_iter()
            .map(|(i, w)| w.map(|w| (i, w)))
            .collect();
        let Some(members) = writers.filter(|m| m.len() == group.len()) else {
            continue;
        };
        for (i, (wsi, wci)) in members {
            let s = &reductions[i];
            let rb = &mut ranks[s.r];
            rb.slots[s.src].dtype = DType::BF16;
            rb.slots[s.src].init = SlotInit::Uninit;
            // A slot that only sends its partial sum away is named so (not a reduce's root
            // summing in place).
            if s.sum != Sum::AllReduce && s.dst != Some(s.src) {
                rb.slots[s.src].name = format!("{}.partial", s.buffer);
            }
            if let Some(dst) = s.dst {
                rb.slots[dst].dtype = DType::BF16;
            }
            let st = rb.stages.get_mut(&wsi).expect("stage");
            if let ComputeOp::Patch {
                patch: PatchKind::Gemm { accumulate, .. },
                ..
            } = &mut st.compute[wci]
            {
                // The accumulator was zero: 0 + a b is a b.
                *accumulate = false;
            }
        }
    }
}
