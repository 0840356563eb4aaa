//! Structural checks of a plan: bounds, patch operands, transfer matching and stage hazards.

use crate::{
    Collective, CombineKind, CommOp, ComputeOp, PatchKind, Plan, RankProgram, Region, RegionSet,
    SlotInit, View,
};
use std::collections::{BTreeMap, HashMap};

mod delivery;
#[cfg(test)]
mod tests;

use delivery::check_outputs_delivered;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("plan has {got} rank programs but the mesh {mesh:?} has {want} ranks")]
    RankCount {
        got: usize,
        want: usize,
        mesh: Vec<usize>,
    },
    #[error("rank {rank}: {what}")]
    Rank { rank: usize, what: String },
    /// A shape too large to count ([`crate::MAX_ELEMENTS`]).
    #[error("{0}")]
    Size(String),
    /// Two run-time inputs of one name.
    #[error("{0}")]
    Inputs(String),
    #[error("stage {stage}: rank {rank}: {what}")]
    Stage {
        stage: usize,
        rank: usize,
        what: String,
    },
}

fn check_view(r: &RankProgram, v: &View) -> Result<(), String> {
    let slot = r
        .slots
        .get(v.slot)
        .ok_or_else(|| format!("view names slot {} of {}", v.slot, r.slots.len()))?;
    if !v.region.fits_in(&slot.shape) {
        return Err(format!(
            "view {} is outside slot '{}' of shape {:?}",
            v.region, slot.name, slot.shape
        ));
    }
    Ok(())
}

/// Views a compute op reads and writes.
pub fn compute_access(op: &ComputeOp) -> (Vec<&View>, Vec<&View>) {
    match op {
        ComputeOp::Patch {
            inputs,
            outputs,
            patch,
        } => {
            let mut reads: Vec<&View> = inputs.iter().collect();
            if patch.accumulates() {
                reads.extend(outputs.iter());
            }
            (reads, outputs.iter().collect())
        }
        ComputeOp::Combine { acc, part, .. } => (
            acc.iter().chain(part.iter()).collect(),
            acc.iter().collect(),
        ),
        ComputeOp::Copy { src, dst } => (vec![src], vec![dst]),
        ComputeOp::Tile { inputs, output, .. } => (inputs.iter().collect(), vec![output]),
    }
}

/// Views a comm op reads and writes on its own rank.
pub fn comm_access(op: &CommOp) -> (Vec<&View>, Vec<&View>) {
    match op {
        CommOp::Send { src, .. } => (vec![src], vec![]),
        CommOp::Recv { dst, .. } => (vec![], vec![dst]),
        CommOp::Collective { collective, .. } => match collective {
            Collective::AllGather { src, dst, .. }
            | Collective::ReduceScatter { src, dst, .. }
            | Collective::AllToAll { src, dst, .. } => (vec![src], vec![dst]),
            Collective::AllReduce { bufs, .. } => (bufs.iter().collect(), bufs.iter().collect()),
            Collective::Broadcast { buf, .. } => (vec![buf], vec![buf]),
            // Every member reads its source; only the root writes.
            Collective::Reduce { src, dst, .. } => (vec![src], dst.iter().collect()),
        },
    }
}

fn conflict(a: &View, b: &View) -> bool {
    a.slot == b.slot && a.region.overlaps(&b.region)
}

/// The views the transfers of one stage have written so far, in order. A few are scanned; from
/// [`Written::INDEX_FROM`] on they are also indexed per slot ([`RegionSet`]), so that a stage
/// with a transfer per rank (a replicated output delivered to every rank) is not checked pair
/// by pair.
#[derive(Default)]
struct Written<'a> {
    views: Vec<&'a View>,
    /// slot -> (positions in `views`, their boxes), once there are enough views.
    index: Option<HashMap<usize, (Vec<usize>, RegionSet)>>,
}

impl<'a> Written<'a> {
    const INDEX_FROM: usize = 32;

    /// The first view written so far that `v` conflicts with.
    fn first_conflict(&self, v: &View) -> Option<&'a View> {
        match &self.index {
            None => self.views.iter().copied().find(|c| conflict(v, c)),
            Some(index) => {
                let (positions, set) = index.get(&v.slot)?;
                let first = *set.overlapping(&v.region).first()?;
                Some(self.views[positions[first]])
            }
        }
    }

    fn push(&mut self, v: &'a View) {
        self.views.push(v);
        if self.index.is_none() && self.views.len() >= Self::INDEX_FROM {
            let mut index: HashMap<usize, (Vec<usize>, RegionSet)> = HashMap::new();
            for (i, w) in self.views.iter().enumerate() {
                let (positions, set) = index.entry(w.slot).or_default();
                positions.push(i);
                set.insert(&w.region);
            }
            self.index = Some(index);
        } else if let Some(index) = &mut self.index {
            let (positions, set) = index.entry(v.slot).or_default();
            positions.push(self.views.len() - 1);
            set.insert(&v.region);
        }
    }
}

/// A patch's operands: as many as its spec says, and for a GEMM views that agree
/// ([`crate::patch::gemm_dims`]), an output type the GEMM can write from its operands
/// ([`crate::patch::gemm_writes`]), and no epilogue on an accumulating instance.
fn check_patch(
    plan: &Plan,
    r: &RankProgram,
    patch: &PatchKind,
    inputs: &[View],
    outputs: &[View],
) -> Result<(), String> {
    let spec = patch.spec();
    if inputs.len() != spec.inputs || outputs.len() != spec.outputs {
        return Err(format!(
            "a {} patch takes {} inputs and {} outputs, not {} and {}",
            spec.name,
            spec.inputs,
            spec.outputs,
            inputs.len(),
            outputs.len()
        ));
    }
    if let Some(mask) = patch.mask() {
        check_mask(plan, mask)?;
    }
    if let PatchKind::Attention { .. } = patch {
        crate::patch::attention_views(inputs, outputs)?;
    }
    if let PatchKind::AttentionBwd { .. } = patch {
        crate::patch::attention_bwd_views(inputs, outputs)?;
    }
    if let PatchKind::Gemm {
        accumulate,
        epilogue,
    } = patch
    {
        if let (true, Some(f)) = (accumulate, epilogue) {
            return Err(format!(
                "a gemm cannot both accumulate and apply the epilogue {f:?}"
            ));
        }
        crate::patch::gemm_dims(
            &inputs[0].region.extent,
            &inputs[1].region.extent,
            &outputs[0].region.extent,
        )?;
        let dtype = |v: &View| r.slots.get(v.slot).map(|s| s.dtype);
        if let (Some(a), Some(b), Some(c)) =
            (dtype(&inputs[0]), dtype(&inputs[1]), dtype(&outputs[0]))
        {
            // Mixed operand types are the backends' to refuse (the CPU executor runs them).
            if !crate::patch::gemm_writes(a, c) || !crate::patch::gemm_writes(b, c) {
                return Err(format!(
                    "a gemm of {} x {} operands cannot write {} (it writes its operands' type or f32)",
                    a.name(),
                    b.name(),
                    c.name()
                ));
            }
        }
    }
    Ok(())
}

/// An attention mask names document boundaries the plan has, and aligns to documents' ends
/// only with documents.
fn check_mask(plan: &Plan, mask: &crate::AttnMask) -> Result<(), String> {
    if let Some(docs) = mask.documents {
        for d in docs {
            if d >= plan.documents.len() {
                return Err(format!(
                    "the mask names document boundaries #{d}, and the plan has {}",
                    plan.documents.len()
                ));
            }
        }
    } else if mask.lower_right {
        return Err("a mask aligned to the documents' ends (lower_right) needs documents".into());
    }
    Ok(())
}

/// A reduce as one member (rank `rank`) writes it: its root is a position in `group`, the
/// root and only the root names a `dst`, of the extents of `src`, and the combine is an add.
fn check_reduce(
    rank: usize,
    group: &[usize],
    src: &View,
    dst: Option<&View>,
    root: usize,
    kind: CombineKind,
) -> Result<(), String> {
    let Some(root_rank) = group.get(root) else {
        return Err(format!(
            "reduce root {root} is outside group {group:?} (the root is a position in the group)"
        ));
    };
    match (dst, *root_rank == rank) {
        (None, true) => {
            return Err(format!(
                "reduce over {group:?} into this rank (root {root}) names no destination"
            ))
        }
        (Some(d), false) => {
            return Err(format!(
                "reduce over {group:?} into rank {root_rank} names a destination {} here (only the root does)",
                d.region
            ))
        }
        (Some(d), true) if d.region.extent != src.region.extent => {
            return Err(format!(
                "reduce destination {} does not have the extents of its source {}",
                d.region, src.region
            ))
        }
        _ => {}
    }
    if kind != CombineKind::Add {
        return Err(format!(
            "reduce over {group:?} with {kind:?}: a reduce combines one view, and an lse merge needs [o, lse]"
        ));
    }
    Ok(())
}

/// The members of every reduce agree: the k-th collective of a group in a stage is one
/// instance on every member (as the executors match them); where one member writes a reduce,
/// every member of the group must, with the same root and kind, and sources of the same
/// extents and element type. Only plans with a reduce are scanned.
fn check_reduce_members(plan: &Plan) -> Result<(), PlanError> {
    let has_reduce = plan.ranks.iter().flat_map(|r| &r.stages).any(|st| {
        st.comm.iter().any(|c| {
            matches!(
                c,
                CommOp::Collective {
                    collective: Collective::Reduce { .. },
                    ..
                }
            )
        })
    });
    if !has_reduce {
        return Ok(());
    }
    for si in 0..plan.num_stages() {
        // (group, occurrence) -> (rank, collective) of every member that wrote it.
        type Members<'p> = Vec<(usize, &'p Collective)>;
        let mut instances: BTreeMap<(&[usize], usize), Members<'_>> = BTreeMap::new();
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else { continue };
            let mut seen: HashMap<&[usize], usize> = HashMap::new();
            for c in &st.comm {
                if let CommOp::Collective { group, collective } = c {
                    let occ = seen.entry(group).or_default();
                    instances
                        .entry((group, *occ))
                        .or_default()
                        .push((r.rank, collective));
                    *occ += 1;
                }
            }
        }
        for ((group, occ), members) in instances {
            let Some(&(first_rank, first)) = members
                .iter()
                .find(|(_, c)| matches!(c, Collective::Reduce { .. }))
            else {
                continue;
            };
            let Collective::Reduce {
                src: src0,
                root: root0,
                kind: kind0,
                ..
            } = first
            else {
                continue;
            };
            let err = |rank: usize, what: String| PlanError::Stage {
                stage: si,
                rank,
                what,
            };
            let dtype0 = plan.ranks[first_rank].slots[src0.slot].dtype;
            for &(rank, c) in &members {
                let Collective::Reduce {
                    src, root, kind, ..
                } = c
                else {
                    return Err(err(
                        rank,
                        format!("collective #{occ} of group {group:?} is a reduce on rank {first_rank} but not here"),
                    ));
                };
                let dtype = plan.ranks[rank].slots[src.slot].dtype;
                if (root, kind) != (root0, kind0)
                    || src.region.extent != src0.region.extent
                    || dtype != dtype0
                {
                    return Err(err(
                        rank,
                        format!(
                            "reduce #{occ} of group {group:?}: this member reduces {} {} into root {root} ({kind:?}), rank {first_rank} {} {} into root {root0} ({kind0:?})",
                            dtype.name(),
                            src.region,
                            dtype0.name(),
                            src0.region
                        ),
                    ));
                }
            }
            if let Some(missing) = group.iter().find(|g| !members.iter().any(|(r, _)| r == *g)) {
                return Err(err(
                    *missing,
                    format!("does not join reduce #{occ} of group {group:?}"),
                ));
            }
        }
    }
    Ok(())
}

/// Checks the plan; returns the first problem found.
pub fn verify(plan: &Plan) -> Result<(), PlanError> {
    // Sizes first: every count below is computed from them (a slot extent of 2^63 in a plan
    // given as JSON overflowed a product: a panic, found by a new-user pass on 2026-12-03).
    let too_big = |shape: &[usize]| {
        shape
            .iter()
            .try_fold(1usize, |a, e| a.checked_mul(*e))
            .is_none_or(|n| n > crate::MAX_ELEMENTS)
    };
    if too_big(&plan.mesh) {
        return Err(PlanError::Size(format!(
            "the mesh {:?} has more than {} ranks",
            plan.mesh,
            crate::MAX_ELEMENTS
        )));
    }
    if let Some(b) = plan.buffers.iter().find(|b| too_big(&b.shape)) {
        return Err(PlanError::Size(format!(
            "buffer '{}' of shape {:?} has more than {} elements",
            b.name,
            b.shape,
            crate::MAX_ELEMENTS
        )));
    }
    for r in &plan.ranks {
        if let Some(s) = r.slots.iter().find(|s| too_big(&s.shape)) {
            return Err(PlanError::Rank {
                rank: r.rank,
                what: format!(
                    "slot '{}' of shape {:?} has more than {} elements",
                    s.name,
                    s.shape,
                    crate::MAX_ELEMENTS
                ),
            });
        }
    }
    // Run-time inputs are bound by name: a document boundaries input shares its name with no
    // buffer and no other input.
    for (i, d) in plan.documents.iter().enumerate() {
        if plan.buffers.iter().any(|b| b.name == d.name)
            || plan.documents[..i].iter().any(|e| e.name == d.name)
        {
            return Err(PlanError::Inputs(format!(
                "two run-time inputs are named '{}' (document boundaries and a buffer, or two boundaries)",
                d.name
            )));
        }
    }
    let n = plan.num_ranks();
    if plan.ranks.len() != n {
        return Err(PlanError::RankCount {
            got: plan.ranks.len(),
            want: n,
            mesh: plan.mesh.clone(),
        });
    }
    // Point-to-point messages per stage: (stage, from, to, tag) -> element count.
    let mut sends: BTreeMap<(usize, usize, usize, u64), usize> = BTreeMap::new();
    let mut recvs: BTreeMap<(usize, usize, usize, u64), usize> = BTreeMap::new();
    for (idx, r) in plan.ranks.iter().enumerate() {
        let rank_err = |what: String| PlanError::Rank { rank: r.rank, what };
        if r.rank != idx {
            return Err(rank_err(format!(
                "program at position {idx} says rank {}",
                r.rank
            )));
        }
        // Ranks are numbered row-major over the mesh: the coordinates are the rank's.
        // (A mesh with a 0 has no ranks: refused above unless the plan has none.)
        let want = crate::coords_of(&plan.mesh, idx);
        if r.coords != want {
            return Err(rank_err(format!(
                "coordinates {:?}, but rank {idx} of mesh {:?} is at {want:?} (ranks are numbered row-major)",
                r.coords, plan.mesh
            )));
        }
        for s in &r.slots {
            let (buffer, regions): (usize, Vec<&Region>) = match &s.init {
                SlotInit::FromGlobal { buffer, region } => (*buffer, vec![region]),
                SlotInit::FromGlobalPieces { buffer, pieces } => {
                    (*buffer, pieces.iter().map(|p| &p.region).collect())
                }
                _ => continue,
            };
            let b = plan
                .buffers
                .get(buffer)
                .ok_or_else(|| rank_err(format!("slot '{}' reads buffer #{buffer}", s.name)))?;
            if let Some(region) = regions.iter().find(|g| !g.fits_in(&b.shape)) {
                return Err(rank_err(format!(
                    "slot '{}' reads {} outside '{}' {:?}",
                    s.name, region, b.name, b.shape
                )));
            }
            if let SlotInit::FromGlobalPieces { pieces, .. } = &s.init {
                for (i, p) in pieces.iter().enumerate() {
                    if !p.at.fits_in(&s.shape) || p.at.extent != p.region.extent {
                        return Err(rank_err(format!(
                            "slot '{}' of shape {:?}: piece {} does not land at {}",
                            s.name, s.shape, p.region, p.at
                        )));
                    }
                    if pieces[..i].iter().any(|q| q.at.overlaps(&p.at)) {
                        return Err(rank_err(format!(
                            "slot '{}': two pieces land on {}",
                            s.name, p.at
                        )));
                    }
                }
            }
            let covered: usize = regions
                .iter()
                .fold(0usize, |a, g| a.saturating_add(g.numel()));
            if covered != Region::full(&s.shape).numel() {
                return Err(rank_err(format!(
                    "slot '{}' of shape {:?} initialised from {covered} elements",
                    s.name, s.shape
                )));
            }
        }
        for o in &r.outputs {
            check_view(r, &o.src).map_err(rank_err)?;
            let b = plan
                .buffers
                .get(o.buffer)
                .ok_or_else(|| rank_err(format!("output names buffer #{}", o.buffer)))?;
            if !o.region.fits_in(&b.shape) || o.region.numel() != o.src.region.numel() {
                return Err(rank_err(format!(
                    "output piece {} does not fit '{}'",
                    o.region, b.name
                )));
            }
        }
        for (si, st) in r.stages.iter().enumerate() {
            let err = |what: String| PlanError::Stage {
                stage: si,
                rank: r.rank,
                what,
            };
            let mut compute_reads = Vec::new();
            let mut compute_writes = Vec::new();
            for op in &st.compute {
                let (rd, wr) = compute_access(op);
                for v in rd.iter().chain(wr.iter()) {
                    check_view(r, v).map_err(err)?;
                }
                if let ComputeOp::Patch {
                    patch,
                    inputs,
                    outputs,
                } = op
                {
                    check_patch(plan, r, patch, inputs, outputs).map_err(err)?;
                }
                if let ComputeOp::Tile {
                    tile: op,
                    inputs,
                    output,
                } = op
                {
                    let shapes: Vec<Vec<usize>> =
                        inputs.iter().map(|v| v.region.extent.clone()).collect();
                    op.check(&shapes, &output.region.extent).map_err(err)?;
                }
                compute_reads.extend(rd);
                compute_writes.extend(wr);
            }
            let mut comm_writes = Written::default();
            for op in &st.comm {
                let (rd, wr) = comm_access(op);
                for v in rd.iter().chain(wr.iter()) {
                    check_view(r, v).map_err(err)?;
                }
                // Hazards: a transfer may not read what compute writes in the same stage, nor
                // write what compute reads or writes.
                for v in &rd {
                    if let Some(w) = compute_writes.iter().find(|w| conflict(v, w)) {
                        return Err(err(format!(
                            "transfer reads slot '{}' {} while compute writes {}",
                            r.slots[v.slot].name, v.region, w.region
                        )));
                    }
                }
                for v in &wr {
                    if let Some(c) = compute_reads
                        .iter()
                        .chain(compute_writes.iter())
                        .find(|c| conflict(v, c))
                    {
                        return Err(err(format!(
                            "transfer writes slot '{}' {} while compute uses {}",
                            r.slots[v.slot].name, v.region, c.region
                        )));
                    }
                    if let Some(c) = comm_writes.first_conflict(v) {
                        return Err(err(format!(
                            "two transfers write slot '{}' {}",
                            r.slots[v.slot].name, c.region
                        )));
                    }
                }
                for v in wr {
                    comm_writes.push(v);
                }
                match op {
                    CommOp::Send { peer, src, tag } => {
                        if *peer >= n || *peer == r.rank {
                            return Err(err(format!("send to invalid peer {peer}")));
                        }
                        if sends
                            .insert((si, r.rank, *peer, *tag), src.region.numel())
                            .is_some()
                        {
                            return Err(err(format!("duplicate send to {peer} tag {tag}")));
                        }
                    }
                    CommOp::Recv { peer, dst, tag } => {
                        if *peer >= n || *peer == r.rank {
                            return Err(err(format!("receive from invalid peer {peer}")));
                        }
                        if recvs
                            .insert((si, *peer, r.rank, *tag), dst.region.numel())
                            .is_some()
                        {
                            return Err(err(format!("duplicate receive from {peer} tag {tag}")));
                        }
                    }
                    CommOp::Collective { group, collective } => {
                        if !group.contains(&r.rank) {
                            return Err(err(format!(
                                "collective group {group:?} does not hold this rank"
                            )));
                        }
                        if let Some(g) = group.iter().find(|g| **g >= n) {
                            return Err(err(format!(
                                "collective group {group:?} names rank {g}, outside the {n} ranks"
                            )));
                        }
                        if let Some(g) = group
                            .iter()
                            .enumerate()
                            .find_map(|(i, g)| group[..i].contains(g).then_some(g))
                        {
                            return Err(err(format!(
                                "collective group {group:?} holds rank {g} twice"
                            )));
                        }
                        // The axes a collective splits or joins are dimensions of its views.
                        let axis_in = |what: &str, axis: usize, v: &View| {
                            if axis < v.region.rank() {
                                Ok(())
                            } else {
                                Err(err(format!(
                                    "{what} axis {axis} is not a dimension of the {}-d view {}",
                                    v.region.rank(),
                                    v.region
                                )))
                            }
                        };
                        match collective {
                            Collective::AllGather { src, dst, axis }
                            | Collective::ReduceScatter { src, dst, axis, .. } => {
                                axis_in("the", *axis, src)?;
                                axis_in("the", *axis, dst)?;
                            }
                            Collective::AllToAll {
                                src,
                                dst,
                                split_axis,
                                concat_axis,
                            } => {
                                axis_in("the split", *split_axis, src)?;
                                axis_in("the concat", *concat_axis, dst)?;
                            }
                            Collective::Broadcast { root, .. } if *root >= group.len() => {
                                return Err(err(format!(
                                    "broadcast root {root} is outside group {group:?} (the root is a position in the group)"
                                )));
                            }
                            _ => {}
                        }
                        if let Collective::Reduce {
                            src,
                            dst,
                            root,
                            kind,
                        } = collective
                        {
                            check_reduce(r.rank, group, src, dst.as_ref(), *root, *kind)
                                .map_err(err)?;
                        }
                    }
                }
            }
        }
    }
    check_outputs_delivered(plan)?;
    for (key, count) in &sends {
        match recvs.get(key) {
            None => {
                return Err(PlanError::Stage {
                    stage: key.0,
                    rank: key.1,
                    what: format!("send to {} tag {} has no matching receive", key.2, key.3),
                })
            }
            Some(c) if c != count => {
                return Err(PlanError::Stage {
                    stage: key.0,
                    rank: key.1,
                    what: format!("send of {count} elements to {} is received as {c}", key.2),
                })
            }
            _ => {}
        }
    }
    if let Some(key) = recvs.keys().find(|k| !sends.contains_key(k)) {
        return Err(PlanError::Stage {
            stage: key.0,
            rank: key.2,
            what: format!("receive from {} tag {} has no matching send", key.1, key.3),
        });
    }
    check_reduce_members(plan)
}
