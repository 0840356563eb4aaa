//! The compute stages: trace stage `s` of every rank becomes plan stage `base + s`, each of its
//! events lowered by the file of its kind (`load.rs`, `patch.rs`, `tile.rs`, `reduce.rs`,
//! `store.rs`).

use crate::context::{Event, Lowering};
use crate::order::Seg;
use crate::placement::BoxIndex;
use mercury_ir::{Diagnostic, ValueId};
use mercury_plan::{DType, View};
use std::collections::HashMap;

/// Where tiles lie while the compute stages are lowered, so that finding the rank that sends a
/// shifted tile (`load.rs`) looks at the ranks holding it, not at every rank.
#[derive(Default)]
pub(crate) struct Holders {
    /// (buffer, box key) -> the ranks whose shard contains that box, in rank order (the shards
    /// do not change during the compute stages).
    pub shards: HashMap<(String, Vec<usize>), Vec<usize>>,
    /// (stage, buffer) -> the tiles ranks received for that stage; an entry's position is its
    /// index in that rank's `received` list of the stage and buffer.
    pub received: HashMap<(usize, String), BoxIndex>,
}

impl StageCx {
    /// Marks `v` left out by the mask rules (it has no view in this stage).
    pub fn mask_out(&mut self, v: ValueId) {
        self.values.remove(&v);
        self.masked_out.insert(v);
    }

    /// The views of operands `vals` of the op at `loc`: `None` when one was left out by the
    /// mask rules (so is this op). A value that has no view for another reason is refused:
    /// each compute stage lowers one iteration's events, so a value computed in another stage
    /// (defined outside the loop that uses it, or before an inner loop and used after it) is
    /// not there. It used to count as masked out, and its contribution was dropped silently
    /// (the product of a loop-invariant load: only the first iteration's; tenth new-user pass,
    /// 2026-12-03).
    pub fn operands(
        &self,
        vals: &[ValueId],
        loc: &mercury_ir::Location,
    ) -> Result<Option<Vec<View>>, Diagnostic> {
        let mut views = Vec::with_capacity(vals.len());
        for v in vals {
            match self.values.get(v) {
                Some(view) => views.push(view.clone()),
                None if self.masked_out.contains(v) => return Ok(None),
                None => {
                    return Err(crate::context::err(
                        loc,
                        "an operand of this op is computed in another stage of the plan: a value defined outside a loop and used inside it, or before an inner loop and used after it, is not supported; load or compute it inside the loop that uses it",
                    ))
                }
            }
        }
        Ok(Some(views))
    }
}

/// One rank's view of one compute stage while its events are lowered.
pub(crate) struct StageCx {
    /// The rank.
    pub r: usize,
    /// The plan stage.
    pub ps: usize,
    /// The plan stage of trace stage 0 (the last prologue stage).
    pub base: usize,
    /// The rank's events of this stage, in order.
    pub events: Vec<Event>,
    /// Where each tile value of the stage lives.
    pub values: HashMap<ValueId, View>,
    /// The real positions of each loaded tile's sequence dimension (the second-to-last), for
    /// attention's causal mask.
    pub seq: HashMap<ValueId, Vec<Seg>>,
    /// The patch ops (indices into the stage's compute) that produced a tile value, when a
    /// causal tile was cut into several blocks: (op index, query rows).
    pub blocks: HashMap<ValueId, Vec<(usize, (usize, usize))>>,
    /// Position of each tile value in its buffer (per dimension), for compute ops' causal
    /// masks: the real first position of a dimension whose positions are one run, `None`
    /// where they are not (a zigzag or striped placement: a causal mask over it is refused).
    pub positions: HashMap<ValueId, Vec<Option<usize>>>,
    /// Values of this stage that the mask rules left out (a fully masked causal block, and
    /// what is computed from it): an op with such an operand is left out too.
    pub masked_out: std::collections::HashSet<ValueId>,
    /// Tile values computed from a tile whose sequence positions are not one run (a zigzag or
    /// striped placement), whichever operand it was: a compute op's causal mask refuses them.
    /// Wider than a `None` in [`StageCx::positions`], which follows only the dimensions that
    /// reach the result, and kept for values whose positions are not followed (a patch's).
    pub scattered: std::collections::HashSet<ValueId>,
    /// Remote tiles of each buffer received so far in this stage (ring slot numbering).
    pub remote_count: HashMap<String, usize>,
    /// The index in `events` of the event being lowered.
    pub at: usize,
}

impl Lowering<'_> {
    /// Lowers every compute stage; `base` is the last prologue stage, where first-stage
    /// prefetches go.
    pub(crate) fn compute_stages(&mut self, base: usize) -> Result<(), Diagnostic> {
        // Patch results that a shifted reduction may send to another rank live two stages, so
        // they are double-buffered; the others are consumed in their stage. A partial sent to
        // its owner (shift-reduce) travels in `partial_sum_dtype`: bf16 into a bf16 output,
        // rounded once and summed in f32 by the owner. An attention backward's partial into a
        // bf16 gradient is no exception: the GPU's patch (cuDNN's fused backward) writes each
        // block's gradients in bf16 anyway, so an f32 partial would carry the same values in
        // twice the bytes, after a conversion pass (measured on an H100: 26 bytes moved per
        // element of a block's dK or dV on the way home in f32, 14 in bf16). A carried
        // accumulator (`carry.rs`) is a running sum, rounded again at every step if it were
        // bf16: it travels in f32 (as ring-flash-attn's dK/dV).
        // An attention backward's gradients that a sum reads: written in the sum's partial
        // type (bf16 into a bf16 gradient) when nothing sends them either (the GPU patch
        // writes bf16 whatever the slot: an f32 slot only costs a conversion pass).
        let bwd_outputs: std::collections::HashSet<ValueId> = self
            .traces
            .iter()
            .flatten()
            .filter_map(|(_, e)| match e {
                Event::Patch {
                    kernel, outputs, ..
                } if kernel == mercury_plan::patch::ATTENTION_BWD.name => Some(outputs),
                _ => None,
            })
            .flatten()
            .copied()
            .collect();
        for (_, e) in self.traces.iter().flatten() {
            if let Event::Reduce {
                values,
                kind,
                buffer,
                carry: false,
                ..
            } = e
            {
                let d = crate::context::partial_sum_dtype(self.k, buffer, *kind);
                for v in values.iter().filter(|v| bwd_outputs.contains(v)) {
                    let e = self.part_dtype.entry(*v).or_insert(d);
                    if *e != d {
                        *e = DType::F32;
                    }
                }
            }
        }
        for t in &self.traces {
            for (_, e) in t {
                if let Event::Reduce {
                    values,
                    shifted: true,
                    kind,
                    buffer,
                    carry,
                    ..
                } = e
                {
                    let wire = if *carry {
                        DType::F32
                    } else {
                        crate::context::partial_sum_dtype(self.k, buffer, *kind)
                    };
                    for v in values {
                        let d = self.sent_values.entry(*v).or_insert(wire);
                        if *d != wire {
                            *d = DType::F32;
                        }
                    }
                }
            }
        }
        self.holders = Holders::default();
        for s in 1..=self.last_stage {
            for r in 0..self.n {
                let events: Vec<Event> = self
                    .stage_events(r, s)
                    .iter()
                    .map(|(_, e)| e.clone())
                    .collect();
                let mut cx = StageCx {
                    r,
                    ps: base + s,
                    base,
                    events: events.clone(),
                    values: HashMap::new(),
                    seq: HashMap::new(),
                    blocks: HashMap::new(),
                    positions: HashMap::new(),
                    masked_out: Default::default(),
                    scattered: Default::default(),
                    remote_count: HashMap::new(),
                    at: 0,
                };
                for (at, e) in events.iter().enumerate() {
                    cx.at = at;
                    match e {
                        Event::Load { .. } => self.lower_load(&mut cx, e)?,
                        Event::Patch { .. } => self.lower_patch(&mut cx, e)?,
                        Event::Compute { .. } => self.lower_tile(&mut cx, e)?,
                        Event::Reduce { .. } => self.lower_reduce(&mut cx, e)?,
                        Event::Store { .. } => self.lower_store(&mut cx, e)?,
                    }
                }
            }
        }
        self.holders = Holders::default();
        Ok(())
    }
}
