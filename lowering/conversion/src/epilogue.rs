//! The end of the compute: partial results of one output tile held by several ranks are
//! combined by AllReduce, or ReduceScatter when the output is sharded over those ranks; then
//! the reshards at the kernel's end move the finished outputs (a finished f32 tile of a bf16
//! output is cast to bf16 first: Ulysses' and USP's output all-to-all carry half the bytes).

use crate::context::{combine_kind, contains, err, key, relative, shape_of, Lowering, RankBuild};
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
    /// to ReduceScatter where the output is sharded over the group), in the stage after the
    /// last one used. Returns the first stage after the combines.
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
        let mut any_collective = false;
        let mut all_reduces = Vec::new();
        for ((buffer, kk), all) in &holders {
            let levels = self.red_levels.get(buffer).cloned().unwrap_or_default();
            if levels.is_empty() {
                continue;
            }
            for &r in all {
                let me = coords_of(&self.mesh, r);
                let group: Vec<usize> = group_of(&self.mesh, &me, &levels)
                    .into_iter()
                    .filter(|q| all.binary_search(q).is_ok())
                    .collect();
                if group.len() < 2 {
                    continue;
                }
                any_collective = true;
                let (_, slots, kind) = self.ranks[r].acc[&(buffer.clone(), kk.clone())].clone();
                let bufs: Vec<View> = slots.iter().map(|s| self.ranks[r].whole(*s)).collect();
                if kind == ReduceKind::Add {
                    all_reduces.push(Reduction {
                        r,
                        si: epi,
                        ci: self.ranks[r].stage(epi).comm.len(),
                        group: group.clone(),
                        buffer: buffer.clone(),
                        tile: kk.clone(),
                        src: slots[0],
                        dst: None,
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
        if any_collective {
            epi += 1;
        }
        let mut reductions =
            reduce_scatter_where_sharded(k, &mut self.ranks, &self.placement, &self.mesh);
        // The all-reduces left (not made reduce-scatters).
        all_reduces.retain(|a| {
            !reductions
                .iter()
                .any(|s| (s.r, s.si, s.ci) == (a.r, a.si, a.ci))
        });
        reductions.extend(all_reduces);
        bf16_partial_sums(k, &mut self.ranks, &reductions);
        epi
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
/// output does not use. Ranks that differ only there hold different partial results; ranks
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
        let mut here: Vec<usize> = stack
            .iter()
            .filter(|l| !b.uses_axis(&l.axis))
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

/// One sum of partial results over ranks: rank `r`'s collective `ci` of stage `si`, over
/// `group`, of tile `tile` of `buffer`, from accumulator slot `src`; a reduce-scatter (made by
/// [`reduce_scatter_where_sharded`]) into the shard slot `dst`, or an all-reduce in place
/// (`dst` is `None`).
struct Reduction {
    r: usize,
    si: usize,
    ci: usize,
    group: Vec<usize>,
    buffer: String,
    tile: Vec<usize>,
    src: usize,
    dst: Option<usize>,
}

/// Replaces AllReduce(add) of a tile by ReduceScatter when the output buffer is sharded (along
/// one dimension) over exactly the ranks of the group: each rank then keeps only its shard.
/// Returns the reduce-scatters made.
fn reduce_scatter_where_sharded(
    k: &Kernel,
    ranks: &mut [RankBuild],
    placement: &HashMap<String, Vec<Vec<usize>>>,
    mesh: &[usize],
) -> Vec<Reduction> {
    let mut made = Vec::new();
    for r in 0..ranks.len() {
        let accs: Vec<((String, Vec<usize>), (Region, Vec<usize>, ReduceKind))> = ranks[r]
            .acc
            .iter()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        for ((buffer, kk), (bx, slots, kind)) in accs {
            if kind != ReduceKind::Add {
                continue;
            }
            let sh = &placement[&buffer];
            let shape = shape_of(k, &buffer);
            let mine = shard_box(&shape, sh, mesh, &ranks[r].coords);
            // Sharded along exactly one dimension, and the tile spans several shards there.
            let dims: Vec<usize> = (0..sh.len())
                .filter(|d| !sh[*d].is_empty() && bx.extent[*d] > mine.extent[*d])
                .collect();
            if dims.len() != 1 {
                continue;
            }
            let d = dims[0];
            let acc_view = View {
                slot: slots[0],
                region: Region::full(&bx.extent),
            };
            let mut found = None;
            for (si, st) in ranks[r].stages.iter() {
                for (ci, c) in st.comm.iter().enumerate() {
                    if let CommOp::Collective {
                        group,
                        collective: Collective::AllReduce { bufs, .. },
                    } = c
                    {
                        if bufs.len() == 1 && bufs[0] == acc_view {
                            found = Some((*si, ci, group.clone()));
                        }
                    }
                }
            }
            let Some((si, ci, group)) = found else {
                continue;
            };
            // Group order must be the shard order along d, and the group must be exactly the
            // holders of the shards of this tile.
            let parts = bx.extent[d] / mine.extent[d];
            if group.len() != parts {
                continue;
            }
            let mut ordered = group.clone();
            ordered.sort_by_key(|q| shard_box(&shape, sh, mesh, &ranks[*q].coords).offset[d]);
            // Every member must find its own shard in this tile, the shards side by side along
            // d covering it: a property of (group, tile), so all members decide alike.
            let shards: Vec<Region> = ordered
                .iter()
                .map(|q| shard_box(&shape, sh, mesh, &ranks[*q].coords))
                .collect();
            let tiles_it = shards.iter().all(|m| contains(&bx, m))
                && shards
                    .windows(2)
                    .all(|w| w[0].offset[d] + w[0].extent[d] == w[1].offset[d])
                && shards.iter().map(|m| m.extent[d]).sum::<usize>() == bx.extent[d];
            if !tiles_it {
                continue;
            }
            let mut dst_shape = bx.extent.clone();
            dst_shape[d] = mine.extent[d];
            let dst = ranks[r].slot(
                format!("{buffer}.rs"),
                DType::F32,
                dst_shape,
                SlotInit::Uninit,
            );
            let dst_view = ranks[r].whole(dst);
            made.push(Reduction {
                r,
                si,
                ci,
                group: ordered.clone(),
                buffer: buffer.clone(),
                tile: kk.clone(),
                src: slots[0],
                dst: Some(dst),
            });
            ranks[r].stages.get_mut(&si).expect("stage").comm[ci] = CommOp::Collective {
                group: ordered,
                collective: Collective::ReduceScatter {
                    src: acc_view,
                    dst: dst_view,
                    axis: d,
                    kind: CombineKind::Add,
                },
            };
            // The rank's output tile is now its shard in the scatter destination.
            ranks[r].acc.remove(&(buffer.clone(), kk));
            let mine_tile = Region {
                offset: bx
                    .offset
                    .iter()
                    .enumerate()
                    .map(|(i, o)| if i == d { mine.offset[d] } else { *o })
                    .collect(),
                extent: ranks[r].slots[dst].shape.clone(),
            };
            ranks[r]
                .stored
                .insert((buffer.clone(), key(&mine_tile)), (mine_tile, dst));
        }
    }
    made
}

/// Partial sums travel in [`crate::context::partial_sum_dtype`] (bf16 for a bf16 output):
/// a reduce-scatter's or all-reduce's accumulator becomes a bf16 slot that its GEMM writes
/// directly (f32 accumulation inside the GEMM, one rounding at its end, no cast kernel), and a
/// reduce-scatter's result is bf16. The combine itself accumulates in f32 on the copy
/// transport; NCCL reduce-scatters and all-reduces bf16 in its own reduction (one rounding
/// per step of its ring, as in the baseline).
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
                if (*si, ci) == (s.si, s.ci) {
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
            if let Some(dst) = s.dst {
                rb.slots[s.src].name = format!("{}.partial", s.buffer);
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
