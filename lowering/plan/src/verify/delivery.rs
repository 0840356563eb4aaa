//! Delivery of the outputs: every element of every output buffer comes from some rank's output
//! pieces, and no piece comes from a slot nothing writes.

use super::{comm_access, compute_access, PlanError};
use crate::{Plan, RankProgram, Region, RegionSet, SlotInit, View};
use std::collections::{HashMap, HashSet};

/// Every element of every output buffer is delivered by some rank's output pieces, and no
/// piece writes an input (a plan given as JSON with empty programs was priced at 0 us and
/// picked: new-user pass, 2026-12-03). The union of the pieces is tested by [`undelivered`].
/// A piece delivered twice (a replicated output delivered by each of its holders) is fine.
pub(super) fn check_outputs_delivered(plan: &Plan) -> Result<(), PlanError> {
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
        // zeroed accumulators, priced at 0 us. A tile the causal mask leaves empty says so
        // (`SlotInit::MaskedZero`, `MaskedNegInf`).
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
pub(super) const COVER_CELLS: usize = 1 << 20;

/// Per dimension, the boundaries of the pieces and of the buffer, sorted and distinct: the
/// cuts of the grid whose cells [`undelivered`] tests.
pub(super) fn cuts(shape: &[usize], pieces: &[&Region]) -> Vec<Vec<usize>> {
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
pub(super) fn undelivered(shape: &[usize], pieces: &[&Region]) -> Option<String> {
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
pub(super) fn cover_counts(cuts: &[Vec<usize>], pieces: &[&Region]) -> Vec<i64> {
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
