//! Structural checks of a plan: bounds, patch operands, transfer matching and stage hazards.

use crate::{
    Collective, CombineKind, CommOp, ComputeOp, PatchKind, Plan, RankProgram, Region, RegionSet,
    SlotInit, View,
};
use std::collections::{BTreeMap, HashMap, HashSet};

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
    #[error("stage {stage}: rank {rank}: {what}")]
    Stage {
        stage: usize,
        rank: usize,
        what: String,
    },
}

/// Every element of every output buffer is delivered by some rank's output pieces, and no
/// piece writes an input (a plan given as JSON with empty programs was priced at 0 us and
/// picked: new-user pass, 2026-12-03). The union of the pieces is tested by [`undelivered`].
/// A piece delivered twice (a replicated output delivered by each of its holders) is fine.
fn check_outputs_delivered(plan: &Plan) -> Result<(), PlanError> {
    if !plan.buffers.iter().any(|b| b.role == crate::Role::Output) {
        return Err(PlanError::Size("the plan has no output buffer".into()));
    }
    for r in &plan.ranks {
        if let Some(o) = r
            .outputs
            .iter()
            .find(|o| plan.buffers.get(o.buffer).map(|b| b.role) == Some(crate::Role::Input))
        {
            return Err(PlanError::Rank {
                rank: r.rank,
                what: format!(
                    "output piece {} writes the input '{}'",
                    o.region, plan.buffers[o.buffer].name
                ),
            });
        }
    }
    for r in &plan.ranks {
        // An output delivered from a slot nothing writes holds only its initial value
        // (undefined, zeros or -inf): a plan given as JSON with empty programs delivered its
        // zeroed accumulators, priced at 0 us (new-user pass, 2026-12-03).
        let unset = |o: &&crate::OutputPiece| {
            r.slots.get(o.src.slot).is_some_and(|slot| {
                matches!(
                    slot.init,
                    SlotInit::Uninit | SlotInit::Zero | SlotInit::NegInf
                )
            })
        };
        if !r.outputs.iter().any(|o| unset(&o)) {
            continue;
        }
        let written = Writes::of(r);
        if let Some(o) = r
            .outputs
            .iter()
            .filter(unset)
            .find(|o| !written.touch(&o.src))
        {
            return Err(PlanError::Rank {
                rank: r.rank,
                what: format!(
                    "output piece {} comes from slot '{}' {}, which nothing writes",
                    o.region, r.slots[o.src.slot].name, o.src.region
                ),
            });
        }
    }
    for (bi, b) in plan.buffers.iter().enumerate() {
        if b.role != crate::Role::Output {
            continue;
        }
        let pieces: Vec<&Region> = plan
            .ranks
            .iter()
            .flat_map(|r| r.outputs.iter())
            .filter(|o| o.buffer == bi)
            .map(|o| &o.region)
            .collect();
        if pieces.is_empty() {
            return Err(PlanError::Size(format!(
                "output '{}' {:?}: no rank delivers any of it",
                b.name, b.shape
            )));
        }
        if let Some(at) = undelivered(&b.shape, &pieces) {
            return Err(PlanError::Size(format!(
                "output '{}' {:?}: no rank delivers {at}",
                b.name, b.shape
            )));
        }
    }
    Ok(())
}

/// Every view a rank's stages write (compute and transfers), indexed per slot, each distinct
/// box once (an accumulator written by a GEMM per step is one box): whether a view is ever
/// written costs a [`RegionSet`] query, not a scan of the rank's ops (a rank delivering a
/// piece per step of a program of a few ops per step made the scans quadratic per rank).
struct Writes<'a> {
    /// slot -> (the distinct boxes written, indexed).
    slots: HashMap<usize, (HashSet<&'a Region>, RegionSet)>,
}

impl<'a> Writes<'a> {
    fn of(r: &'a RankProgram) -> Writes<'a> {
        let mut slots: HashMap<usize, (HashSet<&'a Region>, RegionSet)> = HashMap::new();
        for st in &r.stages {
            let compute = st.compute.iter().flat_map(|c| compute_access(c).1);
            for w in compute.chain(st.comm.iter().flat_map(|c| comm_access(c).1)) {
                let (seen, set) = slots.entry(w.slot).or_default();
                if seen.insert(&w.region) {
                    set.insert(&w.region);
                }
            }
        }
        Writes { slots }
    }

    /// Whether some write shares an element with `v` ([`conflict`]).
    fn touch(&self, v: &View) -> bool {
        self.slots
            .get(&v.slot)
            .is_some_and(|(_, set)| !set.overlapping(&v.region).is_empty())
    }
}

/// The most grid cells [`undelivered`] tests one output on exactly.
const COVER_CELLS: usize = 1 << 20;

/// Per dimension, the boundaries of the pieces and of the buffer, sorted and distinct: the
/// cuts of the grid whose cells [`undelivered`] tests.
fn cuts(shape: &[usize], pieces: &[&Region]) -> Vec<Vec<usize>> {
    (0..shape.len())
        .map(|d| {
            let mut c = vec![0, shape[d]];
            for p in pieces {
                c.push(p.offset[d]);
                c.push(p.offset[d] + p.extent[d]);
            }
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect()
}

/// What of a buffer of `shape` the (non-empty) `pieces` leave out, as the `at` of a "no rank
/// delivers {at}" message; `None` when their union is the whole buffer.
///
/// The pieces' boundaries (and the buffer's) cut each dimension into intervals; on the grid of
/// those cuts every cell lies wholly inside or wholly outside each piece, so the union is
/// tested exactly cell by cell, up to [`COVER_CELLS`] cells: the first cell no piece covers
/// (in row-major order, the last dimension fastest) is named. Past that many cells, only the
/// necessary count is tested (the pieces hold at least the buffer's elements), and a shortfall
/// is named as "every element (the pieces hold N elements)".
///
/// Cost, for P pieces of a d-dimensional buffer and C cells: O(d P log P) to sort the cuts and
/// find each piece's cell range by binary search, O(P min(2^d, C)) to add each piece to a
/// d-dimensional difference array of the cells, and O(d C) for the prefix sums that turn it
/// into per-cell cover counts ([`cover_counts`]). (Testing every cell against every piece was
/// O(d P C): an all-gather GEMM on 512 ranks has P = C = 2^18, minutes of verification.)
fn undelivered(shape: &[usize], pieces: &[&Region]) -> Option<String> {
    let cuts = cuts(shape, pieces);
    let cells = cuts
        .iter()
        .try_fold(1usize, |a, c| a.checked_mul(c.len() - 1));
    match cells {
        Some(n) if n <= COVER_CELLS => {
            let counts = cover_counts(&cuts, pieces);
            let first = counts.iter().position(|c| *c == 0)?;
            // The cell's grid coordinates from its row-major position, the last fastest.
            let (mut offset, mut extent) = (vec![0; cuts.len()], vec![0; cuts.len()]);
            let mut rest = first;
            for (d, c) in cuts.iter().enumerate().rev() {
                let i = rest % (c.len() - 1);
                rest /= c.len() - 1;
                offset[d] = c[i];
                extent[d] = c[i + 1] - c[i];
            }
            Some(Region { offset, extent }.to_string())
        }
        _ => {
            let held = pieces
                .iter()
                .fold(0usize, |a, p| a.saturating_add(p.numel()));
            (held < Region::full(shape).numel())
                .then(|| format!("every element (the pieces hold {held} elements)"))
        }
    }
}

/// How many of `pieces` cover each cell of the grid that `cuts` (per dimension, sorted and
/// distinct, holding every boundary of every piece) cut a buffer into; row-major, the last
/// dimension fastest, one count per cell.
///
/// A d-dimensional difference array: a piece covering cells [lo_k, hi_k) in each dimension k
/// adds (-1)^|S| at each corner that takes hi_k for the dimensions k in S and lo_k for the
/// others (inclusion-exclusion), and a prefix sum along each dimension in turn then leaves at
/// every cell the number of pieces covering it. A corner with some hi_k past the grid's last
/// cell is dropped (it would only cancel beyond the grid), so a piece adds 2^f corners, f the
/// number of dimensions where it stops short of the buffer's end; each such dimension has at
/// least two cells, so 2^f is at most the cell count. O(P (d log P + min(2^d, C)) + d C).
fn cover_counts(cuts: &[Vec<usize>], pieces: &[&Region]) -> Vec<i64> {
    let dims: Vec<usize> = cuts.iter().map(|c| c.len() - 1).collect();
    let cells: usize = dims.iter().product();
    let mut counts = vec![0i64; cells];
    if cells == 0 {
        return counts;
    }
    // Row-major strides of the cell grid.
    let mut stride = vec![1usize; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * dims[d + 1];
    }
    let (mut lo, mut hi) = (vec![0; dims.len()], vec![0; dims.len()]);
    let mut short = Vec::with_capacity(dims.len());
    'pieces: for p in pieces {
        // The piece's cells along each dimension: [lo, hi) (its boundaries are cuts).
        for (d, c) in cuts.iter().enumerate() {
            lo[d] = c.partition_point(|x| *x < p.offset[d]);
            hi[d] = c.partition_point(|x| *x < p.offset[d] + p.extent[d]);
            if lo[d] == hi[d] {
                continue 'pieces; // empty: covers no cell
            }
        }
        let base: usize = lo.iter().zip(&stride).map(|(i, s)| i * s).sum();
        short.clear();
        short.extend((0..dims.len()).filter(|d| hi[*d] < dims[*d]));
        for corner in 0..1usize << short.len() {
            let (mut at, mut sign) = (base, 1);
            for (j, d) in short.iter().enumerate() {
                if corner >> j & 1 == 1 {
                    at += (hi[*d] - lo[*d]) * stride[*d];
                    sign = -sign;
                }
            }
            counts[at] += sign;
        }
    }
    for (d, s) in stride.iter().enumerate() {
        // Along dimension d, within each block of the cells that share the earlier
        // coordinates: each cell adds the one before it.
        for block in counts.chunks_mut(s * dims[d]) {
            for x in *s..block.len() {
                block[x] += block[x - s];
            }
        }
    }
    counts
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
                    check_patch(r, patch, inputs, outputs).map_err(err)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, RankProgram, Slot, Stage};

    /// One rank computing `out = a b` on slots of these shapes, the views whole.
    /// `p` with one output element, which rank 0 delivers from a slot of its own holding one
    /// element of an input (a plan delivers every output: [`check_outputs_delivered`]).
    fn delivering(mut p: crate::Plan) -> crate::Plan {
        let one = || Region::full(&[1]);
        p.buffers.insert(
            0,
            crate::GlobalBuffer {
                name: "done".into(),
                shape: vec![1],
                dtype: DType::F32,
                role: crate::Role::Output,
            },
        );
        p.buffers.push(crate::GlobalBuffer {
            name: "seed".into(),
            shape: vec![1],
            dtype: DType::F32,
            role: crate::Role::Input,
        });
        let seed = p.buffers.len() - 1;
        let r0 = &mut p.ranks[0];
        r0.slots.push(Slot {
            name: "done.src".into(),
            dtype: DType::F32,
            shape: vec![1],
            init: SlotInit::FromGlobal {
                buffer: seed,
                region: one(),
            },
        });
        r0.outputs.push(crate::OutputPiece {
            buffer: 0,
            region: one(),
            src: View {
                slot: r0.slots.len() - 1,
                region: one(),
            },
        });
        p
    }

    fn gemm_plan(a: &[usize], b: &[usize], out: &[usize], accumulate: bool) -> crate::Plan {
        delivering(gemm_plan_bare(a, b, out, accumulate))
    }

    fn gemm_plan_bare(a: &[usize], b: &[usize], out: &[usize], accumulate: bool) -> crate::Plan {
        let slot = |name: &str, shape: &[usize]| Slot {
            name: name.into(),
            dtype: DType::F32,
            shape: shape.to_vec(),
            init: SlotInit::Zero,
        };
        let whole = |slot: usize, shape: &[usize]| View {
            slot,
            region: Region::full(shape),
        };
        crate::Plan {
            name: "g".into(),
            mesh: vec![1],
            buffers: vec![],
            ranks: vec![RankProgram {
                rank: 0,
                coords: vec![0],
                slots: vec![slot("a", a), slot("b", b), slot("out", out)],
                stages: vec![Stage {
                    compute: vec![ComputeOp::Patch {
                        patch: PatchKind::Gemm {
                            accumulate,
                            epilogue: None,
                        },
                        inputs: vec![whole(0, a), whole(1, b)],
                        outputs: vec![whole(2, out)],
                    }],
                    comm: vec![],
                }],
                outputs: vec![],
            }],
        }
    }

    /// A GEMM whose views hold the right element counts but not a `[k, n]` b (or not an
    /// `m x n` out) is refused, naming the stage and rank; so is a patch with missing operands.
    #[test]
    fn gemm_views_must_agree() {
        assert_eq!(
            verify(&gemm_plan(&[64, 32], &[32, 16], &[64, 16], true)),
            Ok(())
        );
        let e = verify(&gemm_plan(&[64, 32], &[16, 64], &[64, 32], false)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stage 0: rank 0: gemm shapes do not agree")
                && e.to_string().contains("b must be laid out [k, n]"),
            "{e}"
        );
        let e = verify(&gemm_plan(&[64, 32], &[32, 16], &[16, 64], false)).unwrap_err();
        assert!(e.to_string().contains("out must be m x n"), "{e}");
        let mut missing = gemm_plan(&[64, 32], &[32, 16], &[64, 16], false);
        if let ComputeOp::Patch { inputs, .. } = &mut missing.ranks[0].stages[0].compute[0] {
            inputs.pop();
        }
        let e = verify(&missing).unwrap_err();
        assert!(
            e.to_string()
                .contains("a gemm patch takes 2 inputs and 1 outputs, not 1 and 1"),
            "{e}"
        );
        let mut both = gemm_plan(&[64, 32], &[32, 16], &[64, 16], true);
        if let ComputeOp::Patch { patch, .. } = &mut both.ranks[0].stages[0].compute[0] {
            *patch = PatchKind::Gemm {
                accumulate: true,
                epilogue: Some(crate::tile::UnaryFn::Gelu),
            };
        }
        let e = verify(&both).unwrap_err();
        assert!(e.to_string().contains("cannot both accumulate"), "{e}");
    }

    /// Rank 0 receives `rows` one-row pieces of slot 'x' from rank 1 in one stage, then
    /// `extra` (if any); rank 1 sends them all from its slot 'y'.
    fn receives(rows: usize, extra: Option<Region>) -> crate::Plan {
        delivering(receives_bare(rows, extra))
    }

    fn receives_bare(rows: usize, extra: Option<Region>) -> crate::Plan {
        let slot = |name: &str, shape: &[usize]| Slot {
            name: name.into(),
            dtype: DType::F32,
            shape: shape.to_vec(),
            init: SlotInit::Zero,
        };
        let mut dsts: Vec<Region> = (0..rows)
            .map(|i| Region {
                offset: vec![i, 0],
                extent: vec![1, 2],
            })
            .collect();
        dsts.extend(extra);
        let recv = dsts
            .iter()
            .enumerate()
            .map(|(t, region)| CommOp::Recv {
                peer: 1,
                dst: View {
                    slot: 0,
                    region: region.clone(),
                },
                tag: t as u64,
            })
            .collect();
        let send = (0..dsts.len())
            .map(|t| CommOp::Send {
                peer: 0,
                src: View {
                    slot: 0,
                    region: Region::full(&[1, 2]),
                },
                tag: t as u64,
            })
            .collect();
        let rank = |r: usize, slots, comm| RankProgram {
            rank: r,
            coords: vec![r],
            slots,
            stages: vec![Stage {
                compute: vec![],
                comm,
            }],
            outputs: vec![],
        };
        crate::Plan {
            name: "p".into(),
            mesh: vec![2],
            buffers: vec![],
            ranks: vec![
                rank(0, vec![slot("x", &[rows, 2])], recv),
                rank(1, vec![slot("y", &[1, 2])], send),
            ],
        }
    }

    /// Two transfers of a stage writing one element are refused, naming the first of them,
    /// whether the stage has a few transfers (scanned) or many (indexed).
    #[test]
    fn transfers_may_not_write_the_same_element() {
        for rows in [4, 100] {
            assert_eq!(verify(&receives(rows, None)), Ok(()));
            let overlapping = Region {
                offset: vec![2, 1],
                extent: vec![2, 1],
            };
            let e = verify(&receives(rows, Some(overlapping))).unwrap_err();
            assert_eq!(
                e.to_string(),
                "stage 0: rank 0: two transfers write slot 'x' [2:3, 0:2]",
                "{rows} rows"
            );
        }
    }

    /// Two ranks reduce their [4, 2] slot 'x' over the group [1, 0] to member 0 (rank 1),
    /// into its [4, 2] slot 'y'; rank 0 only sends.
    fn reduce_plan() -> crate::Plan {
        delivering(reduce_plan_bare())
    }

    fn reduce_plan_bare() -> crate::Plan {
        let slot = |name: &str| Slot {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![4, 2],
            init: SlotInit::Zero,
        };
        let whole = |slot: usize| View {
            slot,
            region: Region::full(&[4, 2]),
        };
        let rank = |r: usize| RankProgram {
            rank: r,
            coords: vec![r],
            slots: vec![slot("x"), slot("y")],
            stages: vec![Stage {
                compute: vec![],
                comm: vec![CommOp::Collective {
                    group: vec![1, 0],
                    collective: Collective::Reduce {
                        src: whole(0),
                        dst: (r == 1).then(|| whole(1)),
                        root: 0,
                        kind: CombineKind::Add,
                    },
                }],
            }],
            outputs: vec![],
        };
        crate::Plan {
            name: "r".into(),
            mesh: vec![2],
            buffers: vec![],
            ranks: vec![rank(0), rank(1)],
        }
    }

    /// The reduce of rank `r` in [`reduce_plan`], to edit.
    fn reduce_of(p: &mut crate::Plan, r: usize) -> &mut Collective {
        match &mut p.ranks[r].stages[0].comm[0] {
            CommOp::Collective { collective, .. } => collective,
            _ => unreachable!(),
        }
    }

    /// Plans given as JSON are checked before anything counts from them (new-user pass,
    /// 2026-12-03): sizes past [`crate::MAX_ELEMENTS`] (a slot extent of 2^63 overflowed a
    /// product: a panic), coordinates that are not the rank's, a group holding a rank twice,
    /// a collective axis outside its views (each was accepted, priced and picked).
    #[test]
    fn malformed_plans_are_refused_before_counting() {
        let refused = |edit: &dyn Fn(&mut crate::Plan)| {
            let mut p = reduce_plan();
            edit(&mut p);
            verify(&p).unwrap_err().to_string()
        };
        let e = refused(&|p| p.ranks[1].slots[0].shape = vec![4, 1 << 63]);
        assert!(
            e.contains("slot 'x' of shape [4, 9223372036854775808] has more than"),
            "{e}"
        );
        let e = refused(&|p| p.mesh = vec![1 << 40, 1 << 40]);
        assert!(e.contains("has more than"), "{e}");
        let e = refused(&|p| p.ranks[1].coords = vec![9]);
        assert_eq!(
            e,
            "rank 1: coordinates [9], but rank 1 of mesh [2] is at [1] (ranks are numbered row-major)"
        );
        let e = refused(&|p| {
            for r in &mut p.ranks {
                if let CommOp::Collective { group, .. } = &mut r.stages[0].comm[0] {
                    *group = vec![1, 1, 0];
                }
            }
        });
        assert!(
            e.ends_with("collective group [1, 1, 0] holds rank 1 twice"),
            "{e}"
        );
        let e = refused(&|p| {
            let v = View {
                slot: 0,
                region: Region::full(&[4, 2]),
            };
            for r in &mut p.ranks {
                if let CommOp::Collective { collective, .. } = &mut r.stages[0].comm[0] {
                    *collective = Collective::AllGather {
                        src: v.clone(),
                        dst: v.clone(),
                        axis: 9,
                    };
                }
            }
        });
        assert!(
            e.ends_with("the axis 9 is not a dimension of the 2-d view [0:4, 0:2]"),
            "{e}"
        );
        // Every output element delivered, no input written, some output.
        let e = refused(&|p| p.ranks[0].outputs.clear());
        assert_eq!(e, "output 'done' [1]: no rank delivers any of it");
        let e = refused(&|p| {
            p.buffers[0].shape = vec![3];
            p.ranks[0].outputs[0].region = Region {
                offset: vec![2],
                extent: vec![1],
            };
        });
        assert_eq!(e, "output 'done' [3]: no rank delivers [0:2]");
        let e = refused(&|p| p.buffers[0].role = crate::Role::Input);
        assert_eq!(e, "the plan has no output buffer");
        let e = refused(&|p| {
            let n = p.ranks[0].slots.len() - 1;
            p.ranks[0].slots[n].init = SlotInit::Zero;
        });
        assert_eq!(
            e,
            "rank 0: output piece [0:1] comes from slot 'done.src' [0:1], which nothing writes"
        );
    }

    /// A reduce is checked per member (root in the group, a destination on the root only, of
    /// the source's extents, an add) and across members (all reduce, to one root, sources
    /// alike), each refusal naming the stage and rank.
    #[test]
    fn bad_reduces_are_refused() {
        assert_eq!(verify(&reduce_plan()), Ok(()));
        // The root only receives; the other member sends its whole source (8 f32).
        assert_eq!(
            reduce_plan().bytes_sent_per_rank(),
            BTreeMap::from([(0, 32), (1, 0)])
        );
        let refused = |edit: &dyn Fn(&mut crate::Plan)| {
            let mut p = reduce_plan();
            edit(&mut p);
            verify(&p).unwrap_err().to_string()
        };
        let e = refused(&|p| {
            if let Collective::Reduce { root, .. } = reduce_of(p, 0) {
                *root = 2;
            }
        });
        assert_eq!(
            e,
            "stage 0: rank 0: reduce root 2 is outside group [1, 0] (the root is a position in the group)"
        );
        let e = refused(&|p| {
            if let Collective::Reduce { dst, .. } = reduce_of(p, 1) {
                *dst = None;
            }
        });
        assert!(
            e.starts_with("stage 0: rank 1: ") && e.contains("names no destination"),
            "{e}"
        );
        let e = refused(&|p| {
            if let Collective::Reduce { dst, .. } = reduce_of(p, 0) {
                *dst = Some(View {
                    slot: 1,
                    region: Region::full(&[4, 2]),
                });
            }
        });
        assert!(
            e.starts_with("stage 0: rank 0: ") && e.contains("(only the root does)"),
            "{e}"
        );
        let e = refused(&|p| {
            if let Collective::Reduce { dst: Some(d), .. } = reduce_of(p, 1) {
                d.region.extent = vec![2, 2];
            }
        });
        assert!(e.contains("does not have the extents of its source"), "{e}");
        let e = refused(&|p| {
            for r in 0..2 {
                if let Collective::Reduce { kind, .. } = reduce_of(p, r) {
                    *kind = CombineKind::LseMerge;
                }
            }
        });
        assert!(e.contains("lse merge needs [o, lse]"), "{e}");
        // Rank 0 takes itself for the root (member 1): each member alone is consistent.
        let e = refused(&|p| {
            if let Collective::Reduce { root, dst, .. } = reduce_of(p, 0) {
                *root = 1;
                *dst = Some(View {
                    slot: 1,
                    region: Region::full(&[4, 2]),
                });
            }
        });
        assert!(
            e.starts_with("stage 0: rank 1: reduce #0 of group [1, 0]")
                || e.starts_with("stage 0: rank 0: reduce #0 of group [1, 0]"),
            "{e}"
        );
        assert!(e.contains("into root"), "{e}");
        let e = refused(&|p| p.ranks[0].slots[0].dtype = DType::BF16);
        assert!(e.contains("bf16") && e.contains("f32"), "{e}");
        let e = refused(&|p| {
            if let Collective::Reduce { src, .. } = reduce_of(p, 0) {
                src.region.extent = vec![2, 2];
            }
        });
        assert!(e.contains("reduce #0 of group [1, 0]"), "{e}");
        let e = refused(&|p| {
            *reduce_of(p, 0) = Collective::AllReduce {
                bufs: vec![View {
                    slot: 0,
                    region: Region::full(&[4, 2]),
                }],
                kind: CombineKind::Add,
            };
        });
        assert_eq!(
            e,
            "stage 0: rank 0: collective #0 of group [1, 0] is a reduce on rank 1 but not here"
        );
        let e = refused(&|p| p.ranks[0].stages[0].comm.clear());
        assert_eq!(
            e,
            "stage 0: rank 0: does not join reduce #0 of group [1, 0]"
        );
    }

    /// Operand and output types the GEMM cannot run (`patch::gemm_writes`) are refused.
    #[test]
    fn gemm_types_must_be_runnable() {
        let typed = |a: DType, b: DType, out: DType| {
            let mut p = gemm_plan(&[64, 32], &[32, 16], &[64, 16], false);
            for (s, d) in p.ranks[0].slots.iter_mut().zip([a, b, out]) {
                s.dtype = d;
            }
            verify(&p)
        };
        for (a, out) in [
            (DType::BF16, DType::BF16),
            (DType::BF16, DType::F32),
            (DType::F16, DType::F16),
            (DType::F16, DType::F32),
            (DType::F32, DType::F32),
            (DType::F64, DType::F32),
        ] {
            assert_eq!(typed(a, a, out), Ok(()), "{a:?} -> {out:?}");
        }
        let e = typed(DType::F32, DType::F32, DType::BF16).unwrap_err();
        assert!(
            e.to_string()
                .contains("a gemm of f32 x f32 operands cannot write bf16"),
            "{e}"
        );
        assert!(typed(DType::F16, DType::F16, DType::BF16).is_err());
        assert!(typed(DType::BF16, DType::F16, DType::BF16).is_err());
    }

    /// The cover test before [`cover_counts`]: each cell of the cut grid against each piece
    /// (O(d P C)), kept as the reference the fast test must agree with.
    fn undelivered_by_scan(shape: &[usize], pieces: &[&Region]) -> Option<String> {
        let cuts = cuts(shape, pieces);
        let n: usize = cuts.iter().map(|c| c.len() - 1).product();
        assert!(n <= COVER_CELLS);
        let mut idx = vec![0usize; cuts.len()];
        for _ in 0..n {
            let corner: Vec<usize> = idx.iter().zip(&cuts).map(|(i, c)| c[*i]).collect();
            let inside = |p: &&Region| {
                corner
                    .iter()
                    .enumerate()
                    .all(|(d, x)| p.offset[d] <= *x && *x < p.offset[d] + p.extent[d])
            };
            if !pieces.iter().any(inside) {
                let end: Vec<usize> = idx.iter().zip(&cuts).map(|(i, c)| c[i + 1]).collect();
                let cell = Region {
                    extent: end.iter().zip(&corner).map(|(e, o)| e - o).collect(),
                    offset: corner,
                };
                return Some(cell.to_string());
            }
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] + 1 < cuts[d].len() {
                    break;
                }
                idx[d] = 0;
            }
        }
        None
    }

    /// The cover test by difference array names the same first undelivered cell as testing
    /// every cell against every piece, on pseudo-random pieces of buffers of 0 to 4
    /// dimensions (empty pieces, empty buffers, overlaps, and tilings that cover exactly).
    #[test]
    fn cover_counts_agree_with_the_cell_by_cell_scan() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let (mut covered, mut uncovered) = (0, 0);
        for case in 0..4000 {
            let rank = next(5);
            let shape: Vec<usize> = (0..rank).map(|_| next(6)).collect();
            let mut pieces: Vec<Region> = Vec::new();
            if case % 3 == 0 {
                // A tiling (some tiles left out or doubled now and then).
                // Per dimension the split points, 0 and the extent among them (twice for an
                // extent of 0, whose one tile is empty).
                let splits: Vec<Vec<usize>> = shape
                    .iter()
                    .map(|s| {
                        let mut c: Vec<usize> = (0..next(3)).map(|_| next(s + 1)).collect();
                        c.extend([0, *s]);
                        c.sort_unstable();
                        c.dedup();
                        if c.len() == 1 {
                            c.push(0);
                        }
                        c
                    })
                    .collect();
                let tiles: usize = splits.iter().map(|c| c.len() - 1).product();
                for t in 0..tiles {
                    let mut rest = t;
                    let mut tile = Region::full(&shape);
                    for (d, c) in splits.iter().enumerate().rev() {
                        let i = rest % (c.len() - 1);
                        rest /= c.len() - 1;
                        tile.offset[d] = c[i];
                        tile.extent[d] = c[i + 1] - c[i];
                    }
                    match next(8) {
                        0 => {}
                        1 => pieces.extend([tile.clone(), tile]),
                        _ => pieces.push(tile),
                    }
                }
            }
            for _ in 0..next(6) {
                let mut p = Region::full(&shape);
                for (d, s) in shape.iter().enumerate() {
                    p.offset[d] = next(s + 1);
                    p.extent[d] = next(s - p.offset[d] + 1);
                }
                pieces.push(p);
            }
            if pieces.is_empty() {
                pieces.push(Region::full(&shape));
            }
            let refs: Vec<&Region> = pieces.iter().collect();
            let want = undelivered_by_scan(&shape, &refs);
            assert_eq!(
                undelivered(&shape, &refs),
                want,
                "shape {shape:?}, pieces {pieces:?}"
            );
            if want.is_some() {
                uncovered += 1;
            } else {
                covered += 1;
            }
        }
        // Both verdicts were exercised often.
        assert!(covered > 500 && uncovered > 500, "{covered} {uncovered}");
    }

    /// An output cell nobody delivers is refused, naming the first such cell in row-major
    /// order; an element delivered twice is not an error; nor is a piece from a zeroed slot
    /// that some op writes. Past [`COVER_CELLS`] grid cells only the element count is tested.
    #[test]
    fn outputs_are_delivered_whole() {
        // 'done' [2, 3] from one-element pieces on rank 0: (0, 1) twice, (1, 0) and (1, 1) late.
        let pieces = |at: &[[usize; 2]]| {
            let mut p = reduce_plan();
            p.buffers[0].shape = vec![2, 3];
            let src = p.ranks[0].outputs[0].src.clone();
            p.ranks[0].outputs = at
                .iter()
                .map(|o| crate::OutputPiece {
                    buffer: 0,
                    region: Region {
                        offset: o.to_vec(),
                        extent: vec![1, 1],
                    },
                    src: src.clone(),
                })
                .collect();
            verify(&p).map_err(|e| e.to_string())
        };
        let some = [[0, 0], [0, 1], [0, 2], [0, 1], [1, 2]];
        assert_eq!(
            pieces(&some),
            Err("output 'done' [2, 3]: no rank delivers [1:2, 0:1]".into())
        );
        let most = [&some[..], &[[1, 0]]].concat();
        assert_eq!(
            pieces(&most),
            Err("output 'done' [2, 3]: no rank delivers [1:2, 1:2]".into())
        );
        let all = [&most[..], &[[1, 1]]].concat();
        assert_eq!(pieces(&all), Ok(()));

        // An output from a zeroed slot is refused unless some op of its rank writes it: on
        // rank 1 the reduce writes all of 'y' and nothing writes 'x'.
        let from = |slot: usize| {
            let mut p = reduce_plan();
            p.buffers[0].shape = vec![2];
            p.ranks[1].outputs.push(crate::OutputPiece {
                buffer: 0,
                region: Region {
                    offset: vec![1],
                    extent: vec![1],
                },
                src: View {
                    slot,
                    region: Region {
                        offset: vec![1, 0],
                        extent: vec![1, 1],
                    },
                },
            });
            verify(&p).map_err(|e| e.to_string())
        };
        assert_eq!(from(1), Ok(()));
        assert_eq!(
            from(0),
            Err(
                "rank 1: output piece [1:2] comes from slot 'x' [1:2, 0:1], which nothing writes"
                    .into()
            )
        );

        // 2050 x 513 grid cells (over 2^20): rows 0, 2, .., 2048 and columns 0, 2, .., 510.
        let shape = [2050, 2050];
        let strips: Vec<Region> = (0..1025)
            .map(|i| Region {
                offset: vec![2 * i, 0],
                extent: vec![1, 2050],
            })
            .chain((0..256).map(|j| Region {
                offset: vec![0, 2 * j],
                extent: vec![2050, 1],
            }))
            .collect();
        let refs: Vec<&Region> = strips.iter().collect();
        let held = (1025 + 256) * 2050;
        assert_eq!(
            undelivered(&shape, &refs),
            Some(format!("every element (the pieces hold {held} elements)"))
        );
        let whole = Region::full(&shape);
        let refs: Vec<&Region> = strips.iter().chain([&whole]).collect();
        assert_eq!(undelivered(&shape, &refs), None);
    }
}
