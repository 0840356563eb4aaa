//! The lowering context: what every phase of the conversion reads and extends (the kernel, the
//! per-rank traces, the buffers' current placement, and each rank's plan under construction),
//! and the box arithmetic the phases share.

use crate::order::Orders;
use mercury_commir::{Compute, Kernel, Placement, ReduceKind};
use mercury_ir::{Attribute, Diagnostic, Location, ValueId};
use mercury_plan::{CommOp, DType, GlobalBuffer, Region, Slot, SlotInit, Stage, View};
use std::collections::{BTreeMap, HashMap};

/// One statement instance a rank executes, as the symbolic execution (`trace.rs`) records it.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    Load {
        buffer: String,
        bx: Region,
        value: ValueId,
        shifted: bool,
        loc: Location,
    },
    Patch {
        kernel: String,
        inputs: Vec<ValueId>,
        outputs: Vec<ValueId>,
        attrs: Vec<(String, Attribute)>,
        loc: Location,
    },
    Compute {
        op: Compute,
        inputs: Vec<ValueId>,
        output: ValueId,
        ty: mercury_ir::Type,
        loc: Location,
    },
    Reduce {
        kind: ReduceKind,
        values: Vec<ValueId>,
        buffer: String,
        bx: Region,
        shifted: bool,
        /// Mesh levels of the parallel loops around the reduction: ranks that differ only on
        /// the other levels compute the same partial (replicas).
        levels: Vec<usize>,
        /// The accumulator travels with the pieces (`carry.rs`).
        carry: bool,
        loc: Location,
    },
    Store {
        value: ValueId,
        buffer: String,
        bx: Region,
        loc: Location,
    },
}

/// A placement: per buffer dimension, the mesh levels it is split over.
pub(crate) type Sharding = Vec<Vec<usize>>;

/// The plan of one rank under construction.
pub(crate) struct RankBuild {
    pub coords: Vec<usize>,
    pub slots: Vec<Slot>,
    pub stages: BTreeMap<usize, Stage>,
    /// buffer -> (slot, box) of the rank's copy of that buffer under the current placement.
    pub shard: HashMap<String, (usize, Region)>,
    /// Tiles received for a stage: (stage, buffer) -> [(box, slot)].
    pub received: HashMap<(usize, String), Vec<(Region, usize)>>,
    /// Ring slots: (buffer, parity, k) -> slot.
    pub ring: HashMap<(String, usize, usize), usize>,
    /// Temporaries for patch and compute results: (value, parity) -> slot.
    pub temps: HashMap<(ValueId, usize), usize>,
    /// Accumulators: (buffer, box) -> slots ([o] or [o, lse]).
    pub acc: BTreeMap<(String, Vec<usize>), (Region, Vec<usize>, ReduceKind)>,
    /// Receive slots of owner-pushed partials: (buffer, box, parity, n) -> slots, where n
    /// counts the partials of that tile received in one stage (a body that reduces into the
    /// same tile twice sends two).
    pub push_recv: HashMap<(String, Vec<usize>, usize, usize), Vec<usize>>,
    /// Partials of a tile received so far in a stage: (stage, buffer, box) -> count.
    pub pushed: HashMap<(usize, String, Vec<usize>), usize>,
    /// Send slots of owner-pushed partials that lie where the next stage overwrites them
    /// (`reduce.rs`, `stable_parts`): (buffer, parity, k, shape) -> slot, k counting the
    /// rank's copied parts of that buffer in one stage.
    pub send: HashMap<(String, usize, usize, Vec<usize>), usize>,
    /// Parts copied into send slots so far: (stage, buffer) -> count.
    pub send_count: HashMap<(usize, String), usize>,
    /// Stored outputs: (buffer, box) -> slot.
    pub stored: BTreeMap<(String, Vec<usize>), (Region, usize)>,
    /// Temp tiles whose last store was of a skipped value (a fully masked causal block):
    /// (buffer, box) -> box. A load of such a tile is skipped too (`load.rs`), as is all that
    /// is computed from it; a store of a value clears the mark.
    pub skipped: BTreeMap<(String, Vec<usize>), Region>,
    /// Receive slots of carried accumulators (`carry.rs`): (buffer, parity, k, shape) -> slot,
    /// k counting the rank's received accumulators of that buffer in one stage.
    pub carry_slots: HashMap<(String, usize, usize, Vec<usize>), usize>,
    /// Carried accumulators received so far in a stage: (stage, buffer) -> count.
    pub carry_count: HashMap<(usize, String), usize>,
    /// Compute ops that run after a stage's transfers (the adds of carried accumulators):
    /// stage -> ops; each such stage is followed by a stage of these ops (`carry.rs`).
    pub post: BTreeMap<usize, Vec<mercury_plan::ComputeOp>>,
}

impl RankBuild {
    pub fn new(coords: Vec<usize>) -> RankBuild {
        RankBuild {
            coords,
            slots: vec![],
            stages: BTreeMap::new(),
            shard: HashMap::new(),
            received: HashMap::new(),
            ring: HashMap::new(),
            temps: HashMap::new(),
            acc: BTreeMap::new(),
            push_recv: HashMap::new(),
            pushed: HashMap::new(),
            send: HashMap::new(),
            send_count: HashMap::new(),
            stored: BTreeMap::new(),
            skipped: BTreeMap::new(),
            carry_slots: HashMap::new(),
            carry_count: HashMap::new(),
            post: BTreeMap::new(),
        }
    }
    pub fn slot(&mut self, name: String, dtype: DType, shape: Vec<usize>, init: SlotInit) -> usize {
        self.slots.push(Slot {
            name,
            dtype,
            shape,
            init,
        });
        self.slots.len() - 1
    }
    pub fn stage(&mut self, s: usize) -> &mut Stage {
        self.stages.entry(s).or_default()
    }
    pub fn whole(&self, slot: usize) -> View {
        View {
            slot,
            region: Region::full(&self.slots[slot].shape),
        }
    }
    /// The last stage any op of this rank uses.
    pub fn last_stage(&self) -> Option<usize> {
        self.stages.keys().copied().max()
    }
}

/// Everything the phases of one kernel's lowering share.
pub(crate) struct Lowering<'k> {
    pub k: &'k Kernel,
    /// Mesh shape, slowest level first.
    pub mesh: Vec<usize>,
    /// Number of ranks.
    pub n: usize,
    /// The operator's global buffers (inputs and outputs; temporaries have none).
    pub buffers: Vec<GlobalBuffer>,
    /// Per rank: the events it executes, with their trace stage (1-based).
    pub traces: Vec<Vec<(usize, Event)>>,
    /// The last trace stage of any rank.
    pub last_stage: usize,
    /// Per rank, where each trace stage's events start in its trace (`trace::stage_starts`;
    /// read through [`Lowering::stage_events`]).
    pub stage_starts: Vec<Vec<usize>>,
    /// Current placement of every buffer, in the lowering's orders (`order.rs`): a placement
    /// aligned with them is the contiguous one over the same levels.
    pub placement: HashMap<String, Sharding>,
    /// The order each buffer dimension is laid out in.
    pub orders: Orders,
    /// The placement every buffer is in, in real positions (outputs end in theirs).
    pub real_placement: HashMap<String, Placement>,
    /// Inputs whose declared placement is not aligned with the orders: per rank the pieces it
    /// holds (box in the orders, view), until the prologue moves them (`permute.rs`).
    pub pending: HashMap<String, Vec<Vec<(Region, View)>>>,
    pub ranks: Vec<RankBuild>,
    /// The last send/receive tag handed out.
    pub tag: u64,
    /// Patch results a shifted reduction sends to another rank (double-buffered), with the
    /// element type they travel in: bf16 when every such reduction is a sum into a bf16 output
    /// (half the bytes on the wire; the owner accumulates in f32), else f32.
    pub sent_values: HashMap<ValueId, DType>,
    /// Gradients of an attention backward patch that a sum into a buffer reads, with the type
    /// the patch writes them in when nothing sends them: the sum's partial type (bf16 into a
    /// bf16 gradient: the GPU patch's own output, added into the f32 accumulator as it is,
    /// with no conversion pass; `compute.rs`).
    pub part_dtype: HashMap<ValueId, DType>,
    /// Per output buffer, the mesh levels its partial results are combined over
    /// (`epilogue::reduction_levels`, the same for every reduction into it).
    pub red_levels: HashMap<String, Vec<usize>>,
    /// Where tiles lie during the compute stages (`compute.rs`).
    pub holders: crate::compute::Holders,
    /// Carried sums (`carry.rs`): per (buffer, tile), the (plan stage, rank) of every
    /// reduction into it, in stage order.
    pub carry_chains: HashMap<(String, Vec<usize>), Vec<(usize, usize)>>,
    /// Carried sums: per (buffer, tile), the rank that holds its accumulator after the last
    /// stage lowered, and the accumulator's view there (`None`: every partial so far masked).
    pub carry_at: HashMap<(String, Vec<usize>), (usize, Option<View>)>,
}

impl Lowering<'_> {
    /// A fresh send/receive tag.
    pub fn next_tag(&mut self) -> u64 {
        self.tag += 1;
        self.tag
    }
    /// A point-to-point transfer in stage `stage`: rank `from` sends `src`, rank `to`
    /// receives it into `dst`.
    pub fn send_recv(&mut self, stage: usize, from: usize, to: usize, src: View, dst: View) {
        let tag = self.next_tag();
        self.ranks[from]
            .stage(stage)
            .comm
            .push(CommOp::Send { peer: to, src, tag });
        self.ranks[to].stage(stage).comm.push(CommOp::Recv {
            peer: from,
            dst,
            tag,
        });
    }
    /// The events of rank `r` in trace stage `s` (none for a stage past the last).
    pub fn stage_events(&self, r: usize, s: usize) -> &[(usize, Event)] {
        let starts = &self.stage_starts[r];
        match (starts.get(s), starts.get(s + 1)) {
            (Some(lo), Some(hi)) => &self.traces[r][*lo..*hi],
            _ => &[],
        }
    }
    /// Index of global buffer `name`.
    pub fn global(&self, name: &str) -> usize {
        self.buffers
            .iter()
            .position(|b| b.name == name)
            .expect("global buffer")
    }
    /// The last stage any rank uses.
    pub fn last_plan_stage(&self) -> usize {
        self.ranks
            .iter()
            .filter_map(RankBuild::last_stage)
            .max()
            .unwrap_or(0)
    }
}

pub(crate) fn err(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

/// Shape of a buffer under the kernel's axes.
pub(crate) fn shape_of(k: &Kernel, buffer: &str) -> Vec<usize> {
    k.buffer(buffer).map(|b| k.shape(b)).unwrap_or_default()
}

/// Whether `inner` lies inside `outer`.
pub(crate) fn contains(outer: &Region, inner: &Region) -> bool {
    (0..outer.rank()).all(|d| {
        inner.offset[d] >= outer.offset[d]
            && inner.offset[d] + inner.extent[d] <= outer.offset[d] + outer.extent[d]
    })
}

/// What [`partition_conflict`]'s refusals end with: the rule they break.
pub(crate) const PARTITION_RULE: &str = "the lowering holds each rank's tiles of a buffer as one partition (store and reduce into tiles that are the same or disjoint, and not both into one tile)";

/// Whether the store or reduction of tile `bx` of `buffer` on `rb` keeps the rank's tiles of
/// that buffer one partition: the lowering holds a slot per stored tile and an accumulator per
/// reduced tile, keyed by the exact box, and a load or the delivery takes whichever holds the
/// box it wants. Two tiles that overlap without being the same, or one tile both stored into
/// and reduced into, would each keep part of the story (a new-user pass, 2026-12-03: a store
/// of 10·X tile by tile after a store of X whole delivered X; a store after a reduction into
/// the same tile was dropped; a reduction of the whole after reductions of tiles did not sum).
/// `reduce` is the reduction's kind, `None` for a store. The error says what the tile meets.
pub(crate) fn partition_conflict(
    rb: &RankBuild,
    r: usize,
    buffer: &str,
    bx: &Region,
    reduce: Option<ReduceKind>,
) -> Option<String> {
    // A temp tile whose last store was of a skipped value (a fully masked causal block) is a
    // stored tile too: a later load of it is skipped, so an overlapping tile would go unseen.
    // The maps are keyed by (buffer, box): this buffer's tiles are one range of each.
    fn of<'m, V>(
        m: &'m BTreeMap<(String, Vec<usize>), V>,
        buffer: &'m str,
    ) -> impl Iterator<Item = &'m V> + 'm {
        m.range((buffer.to_string(), Vec::new())..)
            .take_while(move |((b, _), _)| b == buffer)
            .map(|(_, v)| v)
    }
    let stored = of(&rb.stored, buffer)
        .map(|(sb, _)| sb)
        .chain(of(&rb.skipped, buffer))
        .map(|sb| (sb, None));
    let reduced = of(&rb.acc, buffer).map(|(ab, _, k)| (ab, Some(*k)));
    for (other, kind) in stored.chain(reduced) {
        if !meets(other, bx) {
            continue;
        }
        let same = other == bx;
        let what = match kind {
            None => "stored into",
            Some(_) => "reduced into",
        };
        let clash = match (reduce, kind) {
            (None, None) | (Some(_), Some(_)) if !same => {
                format!(
                    "overlaps the tile {other} that rank {r} has {what} without being that tile"
                )
            }
            (Some(a), Some(b)) if a != b => {
                format!("is also reduced into with '{}' on rank {r}", b.keyword())
            }
            (None, Some(_)) | (Some(_), None) => format!(
                "{} the tile {other} that rank {r} has {what}",
                if same { "is" } else { "overlaps" }
            ),
            _ => continue,
        };
        return Some(clash);
    }
    None
}

/// `inner` with offsets relative to `outer`.
pub(crate) fn relative(outer: &Region, inner: &Region) -> Region {
    Region {
        offset: inner
            .offset
            .iter()
            .zip(&outer.offset)
            .map(|(a, b)| a - b)
            .collect(),
        extent: inner.extent.clone(),
    }
}

/// The plan element type of a CommIR element type.
pub(crate) fn to_dtype(t: &mercury_ir::Type) -> DType {
    match t {
        mercury_ir::Type::F64 => DType::F64,
        mercury_ir::Type::F16 => DType::F16,
        mercury_ir::Type::BF16 => DType::BF16,
        _ => DType::F32,
    }
}

/// The element type partial sums of `buffer` travel in between ranks: bf16 for a sum into a
/// bf16 output (half the bytes; what NCCL + cuBLAS and PyTorch's tensor parallelism send),
/// else f32. The receiving side accumulates in f32 either way (the copy transport; NCCL's own
/// bf16 reduce-scatter rounds once per ring step). This is the one place the choice is made:
/// shift-reduce's sent partials (`compute.rs`) and the reduce-scatter's sources
/// (`epilogue.rs`) both ask here. Rounding each rank's partial sum to bf16 costs about one
/// bf16 rounding more than an f32 reduction (relative error ~3e-3 instead of ~2e-4 against
/// the single-device GEMM, on `examples/gemm_rs.mlir`).
pub(crate) fn partial_sum_dtype(k: &Kernel, buffer: &str, kind: ReduceKind) -> DType {
    let bf16_out = k
        .buffer(buffer)
        .is_some_and(|b| to_dtype(&b.dtype) == DType::BF16);
    if kind == ReduceKind::Add && bf16_out {
        DType::BF16
    } else {
        DType::F32
    }
}

/// A box as a map key.
pub(crate) fn key(bx: &Region) -> Vec<usize> {
    bx.offset.iter().chain(&bx.extent).copied().collect()
}

/// Whether two boxes of one rank share an element: `intersect(a, b).is_some()` without
/// building the common part (an empty box meets nothing).
pub(crate) fn meets(a: &Region, b: &Region) -> bool {
    (0..a.rank()).all(|d| {
        a.offset[d].max(b.offset[d]) < (a.offset[d] + a.extent[d]).min(b.offset[d] + b.extent[d])
    })
}

/// The common part of two boxes, if any.
pub(crate) fn intersect(a: &Region, b: &Region) -> Option<Region> {
    let mut offset = Vec::new();
    let mut extent = Vec::new();
    for d in 0..a.rank() {
        let lo = a.offset[d].max(b.offset[d]);
        let hi = (a.offset[d] + a.extent[d]).min(b.offset[d] + b.extent[d]);
        if hi <= lo {
            return None;
        }
        offset.push(lo);
        extent.push(hi - lo);
    }
    Some(Region { offset, extent })
}

/// Rank whose coordinates differ from `a`'s: (number of the slowest differing level, reversed so
/// that faster is better; number of differing levels).
pub(crate) fn link_cost(a: &[usize], b: &[usize]) -> (usize, usize) {
    let first = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len());
    (
        a.len() - first,
        a.iter().zip(b).filter(|(x, y)| x != y).count(),
    )
}

/// The plan's combine of a CommIR reduction kind.
pub(crate) fn combine_kind(kind: ReduceKind) -> mercury_plan::CombineKind {
    if kind == ReduceKind::Add {
        mercury_plan::CombineKind::Add
    } else {
        mercury_plan::CombineKind::LseMerge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(offset: &[usize], extent: &[usize]) -> Region {
        Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        }
    }

    /// A temp tile whose store was skipped (a fully masked causal block) takes part in the
    /// partition rule: its later load is skipped, so a store over part of it would be lost.
    #[test]
    fn skipped_tile_is_a_stored_tile() {
        let mut rb = RankBuild::new(vec![0]);
        let skipped = region(&[0, 4], &[4, 4]);
        rb.skipped
            .insert(("T".to_string(), key(&skipped)), skipped.clone());
        let clash = partition_conflict(&rb, 0, "T", &region(&[0, 4], &[4, 2]), None);
        assert!(
            clash
                .as_deref()
                .is_some_and(|c| c.contains("without being that tile")),
            "{clash:?}"
        );
        // The same tile stored again, a disjoint tile, and another buffer are fine.
        assert_eq!(partition_conflict(&rb, 0, "T", &skipped, None), None);
        assert_eq!(
            partition_conflict(&rb, 0, "T", &region(&[0, 0], &[4, 4]), None),
            None
        );
        assert_eq!(partition_conflict(&rb, 0, "U", &skipped, None), None);
    }
}
