//! Output delivery: outputs end in their declared placement. Every rank holds its shard of
//! each output (all of it when replicated): its own finished tiles serve in place (as views);
//! the rest is received from ranks holding it, in one final stage (a bf16 output's f32 pieces
//! are cast on their holders one stage before). Then unused slots are pruned and the plan is
//! assembled and verified.

use crate::context::{err, intersect, key, link_cost, relative, Lowering, RankBuild};
use crate::placement::shard_box;
use mercury_commir::Role;
use mercury_ir::Diagnostic;
use mercury_plan::{
    verify, Collective, CommOp, ComputeOp, DType, OutputPiece, Plan, RankProgram, Region,
    RegionSet, SlotInit, Stage, View,
};
use std::collections::{BTreeMap, HashSet};

impl Lowering<'_> {
    /// Every rank's output pieces, receiving what it does not hold in the delivery stage (a
    /// bf16 piece its holder keeps in f32 in the stage after: it is cast there first).
    pub(crate) fn deliver_outputs(&mut self) -> Result<Vec<(usize, OutputPiece)>, Diagnostic> {
        let k = self.k;
        let mut pieces: Vec<(usize, OutputPiece)> = Vec::new();
        let deliver = self.last_plan_stage() + 1;
        let mut casts: Vec<PendingCast> = Vec::new();
        for b in k
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        {
            let gi = self.global(&b.name);
            let shape = k.shape(b);
            let tiles: Vec<Vec<(Region, usize)>> =
                self.ranks.iter().map(|rb| finished(rb, &b.name)).collect();
            // An output ends in its declared placement (the passes refuse to change it); a
            // schedule that computed it elsewhere without moving it back at the end gets it
            // delivered here, point to point.
            let real = b.placement();
            if real != self.real_placement[&b.name] {
                self.real_placement.insert(b.name.clone(), real.clone());
            }
            let aligned = self.orders.aligned(&b.name, &real, &shape, &self.mesh);
            for r in 0..self.n {
                // The rank's part in the lowering's orders: one box when its placement is
                // aligned with them, else the boxes its real positions fall into.
                let wants: Vec<Region> = if aligned {
                    vec![shard_box(
                        &shape,
                        &real.levels,
                        &self.mesh,
                        &self.ranks[r].coords,
                    )]
                } else {
                    let (pieces, _) = self.orders.shard_pieces(
                        &b.name,
                        &real,
                        &shape,
                        &self.mesh,
                        &self.ranks[r].coords,
                    );
                    pieces.into_iter().map(|p| p.logical).collect()
                };
                for want in wants {
                    self.deliver_part(
                        &mut pieces,
                        &mut casts,
                        (b, gi),
                        &tiles,
                        (r, deliver),
                        &want,
                    )?;
                }
            }
        }
        self.cast_and_send(casts, deliver);
        Ok(pieces)
    }

    /// The bf16 pieces held in f32, sent in the stage after `deliver`: each holder casts, in
    /// the delivery stage, once per held tile the bounding box of the parts it sends (when
    /// that box is at most twice their elements), else once per distinct part; every part is
    /// then sent from its cast. One cast per tile instead of one per part and receiver: a
    /// striped output's 28 stripes of a rank are one copy, not 28 launches.
    fn cast_and_send(&mut self, casts: Vec<PendingCast>, deliver: usize) {
        // Keyed by the tile too: every part of a group is relative to that one tile.
        let mut by_tile: BTreeMap<(usize, usize, Vec<usize>), Vec<PendingCast>> = BTreeMap::new();
        for c in casts {
            by_tile
                .entry((c.holder, c.slot, key(&c.tile)))
                .or_default()
                .push(c);
        }
        for ((q, slot, _), sends) in by_tile {
            let tile = sends[0].tile.clone();
            // Distinct parts (a part several receivers want is cast once), in tile coordinates.
            let mut parts: Vec<Region> = Vec::new();
            let mut seen: HashSet<&Region> = HashSet::new();
            for c in &sends {
                if seen.insert(&c.part) {
                    parts.push(c.part.clone());
                }
            }
            let bbox = bounding_box(&parts);
            let elements: usize = parts.iter().map(Region::numel).sum();
            let boxes = if bbox.numel() <= 2 * elements {
                vec![bbox]
            } else {
                parts
            };
            let holder = &mut self.ranks[q];
            let mut cast_of: Vec<(Region, usize)> = Vec::new();
            let mut cast_set = RegionSet::new();
            for bx in boxes {
                let cast = holder.slot(
                    format!("{}.narrow", sends[0].buffer),
                    DType::BF16,
                    bx.extent.clone(),
                    SlotInit::Uninit,
                );
                let to = holder.whole(cast);
                holder.stage(deliver).compute.push(ComputeOp::Copy {
                    src: View {
                        slot,
                        region: relative(&tile, &bx),
                    },
                    dst: to,
                });
                cast_set.insert(&bx);
                cast_of.push((bx, cast));
            }
            for c in sends {
                let (bx, cast) = cast_set
                    .overlapping(&c.part)
                    .into_iter()
                    .map(|i| &cast_of[i])
                    .find(|(bx, _)| crate::context::contains(bx, &c.part))
                    .expect("every sent part lies in one of its tile's casts");
                let src = View {
                    slot: *cast,
                    region: relative(bx, &c.part),
                };
                self.send_recv(deliver + 1, q, c.receiver, src, c.dst);
            }
        }
    }

    /// Delivers `want` (a box of output `b` in the lowering's orders) to rank `r`: its own
    /// finished tiles serve in place, the rest is received from other ranks (fastest link
    /// first) in the delivery stage, or in the stage after for a bf16 piece its holder keeps
    /// in f32 (cast on the holder in the delivery stage). Pieces are recorded at their real
    /// positions.
    fn deliver_part(
        &mut self,
        pieces: &mut Vec<(usize, OutputPiece)>,
        casts: &mut Vec<PendingCast>,
        (b, gi): (&mercury_commir::Buffer, usize),
        tiles: &[Vec<(Region, usize)>],
        (r, deliver): (usize, usize),
        want: &Region,
    ) -> Result<(), Diagnostic> {
        let want = want.clone();
        // The parts taken so far, and their boxes indexed (a replicated output has a part per
        // rank on every rank).
        let mut got: (Vec<Region>, RegionSet) = (Vec::new(), RegionSet::new());
        let add = |(got, set): &mut (Vec<Region>, RegionSet),
                   part: &Region|
         -> Result<bool, Diagnostic> {
            let near = set.overlapping(part);
            if near
                .iter()
                .any(|g| crate::context::contains(&got[*g], part))
            {
                return Ok(false);
            }
            if !near.is_empty() {
                return Err(err(&b.loc, format!("'@{}' is held in overlapping, different tiles around {part}; the schedule writes it ambiguously", b.name)));
            }
            got.push(part.clone());
            set.insert(part);
            Ok(true)
        };
        // Own tiles first.
        for (bx, slot) in &tiles[r] {
            if let Some(part) = intersect(bx, &want) {
                if add(&mut got, &part)? {
                    let src = View {
                        slot: *slot,
                        region: relative(bx, &part),
                    };
                    pieces.extend(self.real_pieces(r, &b.name, gi, &part, &src));
                }
            }
        }
        if got.0.iter().map(Region::numel).sum::<usize>() == want.numel() {
            return Ok(());
        }
        // Then from the other ranks, fastest link first. A bf16 output travels as bf16: a
        // piece held in f32 is cast on its holder in the delivery stage and sent in the next
        // (the cast the final copy into the output would make, made before the move).
        let narrow = crate::context::to_dtype(&b.dtype) == DType::BF16;
        let mut others: Vec<usize> = (0..self.n).filter(|q| *q != r).collect();
        others.sort_by_key(|q| link_cost(&self.ranks[r].coords, &self.ranks[*q].coords));
        let mut dst_slot = None;
        for q in others {
            for (bx, slot) in tiles[q].clone() {
                let Some(part) = intersect(&bx, &want) else {
                    continue;
                };
                if !add(&mut got, &part)? {
                    continue;
                }
                let dst = *dst_slot.get_or_insert_with(|| {
                    self.ranks[r].slot(
                        format!("{}.delivered", b.name),
                        if narrow { DType::BF16 } else { DType::F32 },
                        want.extent.clone(),
                        SlotInit::Uninit,
                    )
                });
                let dst_view = View {
                    slot: dst,
                    region: relative(&want, &part),
                };
                if narrow && self.ranks[q].slots[slot].dtype == DType::F32 {
                    casts.push(PendingCast {
                        buffer: b.name.clone(),
                        holder: q,
                        slot,
                        tile: bx.clone(),
                        part: part.clone(),
                        receiver: r,
                        dst: dst_view.clone(),
                    });
                } else {
                    let src = View {
                        slot,
                        region: relative(&bx, &part),
                    };
                    self.send_recv(deliver, q, r, src, dst_view.clone());
                }
                pieces.extend(self.real_pieces(r, &b.name, gi, &part, &dst_view));
            }
        }
        let have: usize = got.0.iter().map(Region::numel).sum();
        if have != want.numel() {
            return Err(err(&b.loc, format!("the schedule produces {have} of the {} elements of rank {:?}'s part {want} of '@{}'", want.numel(), self.ranks[r].coords, b.name)));
        }
        Ok(())
    }

    /// The output pieces of box `part` (in the lowering's orders) of `buffer`, held at `src`:
    /// one per run of real positions it covers.
    fn real_pieces(
        &self,
        r: usize,
        buffer: &str,
        gi: usize,
        part: &Region,
        src: &View,
    ) -> Vec<(usize, OutputPiece)> {
        self.orders
            .global_pieces(buffer, part)
            .into_iter()
            .map(|p| {
                let region = Region {
                    offset: src
                        .region
                        .offset
                        .iter()
                        .zip(&p.at.offset)
                        .map(|(a, b)| a + b)
                        .collect(),
                    extent: p.at.extent,
                };
                (
                    r,
                    OutputPiece {
                        buffer: gi,
                        region: p.global,
                        src: View {
                            slot: src.slot,
                            region,
                        },
                    },
                )
            })
            .collect()
    }

    /// The plan: unused slots pruned, stages numbered densely, verified.
    pub(crate) fn finish(
        mut self,
        mut pieces: Vec<(usize, OutputPiece)>,
    ) -> Result<Plan, Diagnostic> {
        let n = self.ranks.len();
        for (rb, mine) in self.ranks.iter_mut().zip(per_rank_mut(&mut pieces, n)) {
            prune_slots(rb, mine);
        }
        let num_stages = self
            .ranks
            .iter()
            .flat_map(|r| r.stages.keys().copied())
            .max()
            .map_or(0, |m| m + 1);
        let mut outputs: Vec<Vec<OutputPiece>> = vec![Vec::new(); n];
        for (r, p) in pieces {
            if let Some(o) = outputs.get_mut(r) {
                o.push(p);
            }
        }
        let mut plan_ranks = Vec::new();
        for ((r, rb), outputs) in self.ranks.into_iter().enumerate().zip(outputs) {
            let mut stages = vec![Stage::default(); num_stages];
            for (s, st) in rb.stages {
                stages[s] = st;
            }
            plan_ranks.push(RankProgram {
                rank: r,
                coords: rb.coords,
                slots: rb.slots,
                stages,
                outputs,
            });
        }
        let k = self.k;
        let mut plan = Plan {
            name: k.name.clone(),
            mesh: self.mesh,
            buffers: self.buffers,
            documents: k
                .documents
                .iter()
                .map(|d| mercury_plan::Documents {
                    name: d.name.clone(),
                    positions: d.positions,
                })
                .collect(),
            ranks: plan_ranks,
        };
        // A mask beyond causal: the K/V pieces no remaining block reads are not sent.
        let masked = plan
            .ranks
            .iter()
            .flat_map(|r| &r.stages)
            .flat_map(|st| &st.compute)
            .any(|op| {
                matches!(op, ComputeOp::Patch { patch, .. } if patch.mask().is_some_and(|m| !m.is_none()))
            });
        if masked {
            crate::dead_transfers::drop_dead_transfers(&mut plan);
        }
        verify(&plan).map_err(|e| {
            err(
                &k.loc,
                format!("internal error: the lowered plan is invalid: {e}"),
            )
        })?;
        Ok(plan)
    }
}

/// The output pieces of each of `n` ranks (`pieces` are `(rank, piece)`), each rank's in their
/// order: one pass over the pieces rather than one per rank (a replicated output has a piece
/// per rank on every rank).
pub(crate) fn per_rank(pieces: &[(usize, OutputPiece)], n: usize) -> Vec<Vec<&OutputPiece>> {
    let mut out: Vec<Vec<&OutputPiece>> = (0..n).map(|_| Vec::new()).collect();
    for (r, p) in pieces {
        if let Some(o) = out.get_mut(*r) {
            o.push(p);
        }
    }
    out
}

/// [`per_rank`], the pieces to modify.
pub(crate) fn per_rank_mut(
    pieces: &mut [(usize, OutputPiece)],
    n: usize,
) -> Vec<Vec<&mut OutputPiece>> {
    let mut out: Vec<Vec<&mut OutputPiece>> = (0..n).map(|_| Vec::new()).collect();
    for (r, p) in pieces.iter_mut() {
        if let Some(o) = out.get_mut(*r) {
            o.push(p);
        }
    }
    out
}

/// A part of a bf16 output that its holder keeps in f32 and sends to `receiver`: cast on the
/// holder first ([`Lowering::cast_and_send`]).
struct PendingCast {
    buffer: String,
    holder: usize,
    /// The holder's f32 slot and the tile of the buffer it holds (global box).
    slot: usize,
    tile: Region,
    /// The part sent (global box, inside `tile`) and where it lands on the receiver.
    part: Region,
    receiver: usize,
    dst: View,
}

/// The smallest box holding every one of `parts` (at least one).
fn bounding_box(parts: &[Region]) -> Region {
    let dims = parts[0].offset.len();
    let lo: Vec<usize> = (0..dims)
        .map(|d| parts.iter().map(|p| p.offset[d]).min().expect("a part"))
        .collect();
    let hi: Vec<usize> = (0..dims)
        .map(|d| {
            parts
                .iter()
                .map(|p| p.offset[d] + p.extent[d])
                .max()
                .expect("a part")
        })
        .collect();
    Region {
        extent: lo.iter().zip(&hi).map(|(l, h)| h - l).collect(),
        offset: lo,
    }
}

/// Finished tiles of `buffer` on a rank, as disjoint sets (a tile inside a larger one on the
/// same rank holds the same values and is dropped).
fn finished(rb: &RankBuild, buffer: &str) -> Vec<(Region, usize)> {
    let mut t: Vec<(Region, usize)> = rb
        .acc
        .iter()
        .filter(|((bn, _), _)| *bn == buffer)
        .map(|(_, (bx, slots, _))| (bx.clone(), slots[0]))
        .chain(
            rb.stored
                .iter()
                .filter(|((bn, _), _)| *bn == buffer)
                .map(|(_, (bx, s))| (bx.clone(), *s)),
        )
        .collect();
    t.sort_by_key(|(bx, _)| std::cmp::Reverse(bx.numel()));
    let mut kept: Vec<(Region, usize)> = Vec::new();
    for (bx, s) in t {
        if !kept.iter().any(|(c, _)| crate::context::contains(c, &bx)) {
            kept.push((bx, s));
        }
    }
    kept
}

/// Removes slots no op or output piece references (e.g. patch temporaries that a fused
/// accumulation made unnecessary) and renumbers the views.
fn prune_slots(rb: &mut RankBuild, outputs: Vec<&mut OutputPiece>) {
    let mut used = vec![false; rb.slots.len()];
    let mut mark = |v: &View| used[v.slot] = true;
    for st in rb.stages.values() {
        for op in &st.compute {
            let (r, w) = mercury_plan::verify::compute_access(op);
            r.into_iter().chain(w).for_each(&mut mark);
        }
        for op in &st.comm {
            let (r, w) = mercury_plan::verify::comm_access(op);
            r.into_iter().chain(w).for_each(&mut mark);
        }
    }
    for o in outputs.iter() {
        mark(&o.src);
    }
    if used.iter().all(|u| *u) {
        return;
    }
    let mut remap = vec![usize::MAX; rb.slots.len()];
    let mut kept = Vec::new();
    for (i, s) in rb.slots.drain(..).enumerate() {
        if used[i] {
            remap[i] = kept.len();
            kept.push(s);
        }
    }
    rb.slots = kept;
    let fix = |v: &mut View| v.slot = remap[v.slot];
    for st in rb.stages.values_mut() {
        for op in &mut st.compute {
            match op {
                ComputeOp::Patch {
                    inputs, outputs, ..
                } => inputs.iter_mut().chain(outputs.iter_mut()).for_each(fix),
                ComputeOp::Combine { acc, part, .. } => {
                    acc.iter_mut().chain(part.iter_mut()).for_each(fix)
                }
                ComputeOp::Copy { src, dst } => {
                    fix(src);
                    fix(dst);
                }
                ComputeOp::Tile { inputs, output, .. } => {
                    inputs.iter_mut().for_each(fix);
                    fix(output);
                }
            }
        }
        for op in &mut st.comm {
            match op {
                CommOp::Send { src, .. } => fix(src),
                CommOp::Recv { dst, .. } => fix(dst),
                CommOp::Collective { collective, .. } => match collective {
                    Collective::AllGather { src, dst, .. }
                    | Collective::ReduceScatter { src, dst, .. }
                    | Collective::AllToAll { src, dst, .. } => {
                        fix(src);
                        fix(dst);
                    }
                    Collective::AllReduce { bufs, .. } => bufs.iter_mut().for_each(fix),
                    Collective::Broadcast { buf, .. } => fix(buf),
                    Collective::Reduce { src, dst, .. } => {
                        fix(src);
                        dst.iter_mut().for_each(fix);
                    }
                },
            }
        }
    }
    for o in outputs {
        fix(&mut o.src);
    }
}
