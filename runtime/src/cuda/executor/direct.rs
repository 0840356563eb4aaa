//! Direct binding: cuDNN attention blocks read input buffers and write output buffers where
//! they are bound, instead of through the rank's slots.
//!
//! A slot whose only initialisation is an exact copy of a region of a global input (same
//! dtype, the slot's whole shape), which nothing writes afterwards, which no transfer reads,
//! and which only cuDNN attention blocks read (as q, k or v), is an alias of that region: the
//! blocks read the bound memory (any strides cuDNN takes: last stride 1, 16-byte aligned) and
//! the copy is skipped. An attention block that overwrites its (o, lse) accumulator (no
//! merge: the first block into it, see `fresh.rs`), whose accumulator slots nothing else
//! touches and which the output gather copies whole into a bf16 output (and an f32 lse
//! output, or none), writes the output itself: cuDNN's bf16 O and f32 Stats land in the
//! caller's tensors, and the merge into the f32 accumulator and the gather's conversion are
//! skipped. The values are the same: the merge of a single block into a fresh accumulator
//! stores cuDNN's bf16 O exactly in f32, and the gather rounds it back to the same bf16.
//!
//! At world size 1 this leaves one cuDNN call where there were three input copies, the
//! call, a merge and a conversion (torch.profiler at B16 H32 S4K causal on an H100: 1.05 ms of
//! copies and 1.35 ms of merge and conversion around a 3.48 ms kernel). Which uses apply is
//! decided per run from the memory then bound ([`CudaExecutor::apply_direct`]): a layout
//! cuDNN cannot take (or whose plan the loaded library refuses) keeps the slot path.

use super::{CudaExecutor, GlobalMem};
use crate::cuda::error::Result;
use crate::cuda::ops::{AttnVia, ComputeLaunch, DirectCall};
use mercury_kernels::cuda::Tensor4;
use mercury_plan::verify::{comm_access, compute_access};
use mercury_plan::{ComputeOp, PatchKind, Plan, RankProgram, Region, SlotInit, View};

/// A slot that may alias a region of a global input.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DirectIn {
    pub slot: usize,
    pub buffer: usize,
    /// The region of the buffer the slot holds (its extent is the slot's shape).
    pub region: Region,
    /// Every op reading the slot: `(stage, op, operand, view region)`, operand 0/1/2 for
    /// q/k/v of an attention block.
    pub readers: Vec<(usize, usize, usize, Region)>,
}

/// An attention block that may write its output buffer (and lse buffer) itself.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DirectOut {
    pub stage: usize,
    pub op: usize,
    /// `(index into the rank's output pieces, buffer, region)` of the output.
    pub o: (usize, usize, Region),
    /// The same for the lse; `None` when no output piece reads the lse (it stays internal,
    /// in scratch).
    pub lse: Option<(usize, usize, Region)>,
}

/// What of a rank may be bound directly (plan-level: decided once, when the executor is built).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct DirectPlan {
    pub inputs: Vec<DirectIn>,
    pub outputs: Vec<DirectOut>,
}

impl DirectPlan {
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.outputs.is_empty()
    }
}

/// A view covering its whole slot.
fn whole(r: &RankProgram, v: &View) -> bool {
    r.slots
        .get(v.slot)
        .is_some_and(|s| v.region.offset.iter().all(|&o| o == 0) && v.region.extent == s.shape)
}

/// The direct uses of rank program `r` of `plan` (see the module docs).
pub(super) fn analyse(plan: &Plan, r: &RankProgram) -> DirectPlan {
    let n = r.slots.len();
    // Per slot: written by an op, read by a transfer, read by something other than an
    // attention block's q/k/v, and the attention reads.
    let mut written = vec![false; n];
    let mut other_read = vec![false; n];
    let mut touched_by = vec![0usize; n];
    let mut reads: Vec<Vec<(usize, usize, usize, Region)>> = vec![Vec::new(); n];
    for (si, st) in r.stages.iter().enumerate() {
        for c in &st.comm {
            let (rd, wr) = comm_access(c);
            for v in rd {
                if let Some(x) = other_read.get_mut(v.slot) {
                    *x = true;
                }
            }
            for v in &wr {
                if let Some(x) = written.get_mut(v.slot) {
                    *x = true;
                }
            }
            count_op(&wr, &mut touched_by);
        }
        for (oi, op) in st.compute.iter().enumerate() {
            let (rd, wr) = compute_access(op);
            count_op(
                &rd.iter().chain(&wr).copied().collect::<Vec<_>>(),
                &mut touched_by,
            );
            for v in &wr {
                if let Some(x) = written.get_mut(v.slot) {
                    *x = true;
                }
            }
            let (attention_inputs, own_outputs) = match op {
                ComputeOp::Patch {
                    patch: PatchKind::Attention { .. },
                    inputs,
                    outputs,
                } => (Some(inputs), Some(outputs)),
                _ => (None, None),
            };
            for v in rd {
                let operand = attention_inputs
                    .and_then(|ins| ins.iter().take(3).position(|x| std::ptr::eq(x, v)));
                // An accumulating block reads its own accumulator: counted in `touched_by`.
                let own = own_outputs.is_some_and(|os| os.iter().any(|x| std::ptr::eq(x, v)));
                match operand {
                    Some(k) if v.slot < n => reads[v.slot].push((si, oi, k, v.region.clone())),
                    _ if own => {}
                    _ => {
                        if let Some(x) = other_read.get_mut(v.slot) {
                            *x = true;
                        }
                    }
                }
            }
        }
    }
    let mut out = DirectPlan::default();
    for (s, slot) in r.slots.iter().enumerate() {
        let SlotInit::FromGlobal { buffer, region } = &slot.init else {
            continue;
        };
        let same_type = plan
            .buffers
            .get(*buffer)
            .is_some_and(|b| b.dtype == slot.dtype);
        if same_type
            && region.extent == slot.shape
            && !written[s]
            && !other_read[s]
            && !reads[s].is_empty()
        {
            out.inputs.push(DirectIn {
                slot: s,
                buffer: *buffer,
                region: region.clone(),
                readers: std::mem::take(&mut reads[s]),
            });
        }
    }
    // Output pieces by the slot they copy.
    let piece_of = |slot: usize| -> Vec<usize> {
        (0..r.outputs.len())
            .filter(|i| r.outputs[*i].src.slot == slot)
            .collect()
    };
    for (si, st) in r.stages.iter().enumerate() {
        for (oi, op) in st.compute.iter().enumerate() {
            let ComputeOp::Patch {
                patch: PatchKind::Attention { .. },
                outputs,
                ..
            } = op
            else {
                continue;
            };
            let [o, l] = outputs.as_slice() else { continue };
            // Only this block touches the accumulator (the count is 1: this op).
            let alone = |s: usize| touched_by.get(s) == Some(&1) && !other_read[s];
            if o.slot == l.slot || !whole(r, o) || !whole(r, l) || !alone(o.slot) {
                continue;
            }
            let (po, pl) = (piece_of(o.slot), piece_of(l.slot));
            let [io] = po.as_slice() else { continue };
            let op_piece = &r.outputs[*io];
            let bf16_out = plan
                .buffers
                .get(op_piece.buffer)
                .is_some_and(|b| b.dtype == mercury_plan::DType::BF16);
            if op_piece.src != *o || !bf16_out {
                continue;
            }
            let lse = match pl.as_slice() {
                [] if alone(l.slot) => None,
                [il] => {
                    let lp = &r.outputs[*il];
                    let f32_out = plan
                        .buffers
                        .get(lp.buffer)
                        .is_some_and(|b| b.dtype == mercury_plan::DType::F32);
                    if lp.src != *l || !f32_out || !alone(l.slot) {
                        continue;
                    }
                    Some((*il, lp.buffer, lp.region.clone()))
                }
                _ => continue,
            };
            out.outputs.push(DirectOut {
                stage: si,
                op: oi,
                o: (*io, op_piece.buffer, op_piece.region.clone()),
                lse,
            });
        }
    }
    out
}

/// Counts one more op touching each slot `views` name (once per slot).
fn count_op(views: &[&View], touched_by: &mut [usize]) {
    let mut slots: Vec<usize> = views.iter().map(|v| v.slot).collect();
    slots.sort_unstable();
    slots.dedup();
    for s in slots {
        if let Some(t) = touched_by.get_mut(s) {
            *t += 1;
        }
    }
}

/// The address and element strides (4-D, as cuDNN takes them) of `region` of global `g`
/// where one bound piece holds it, cuDNN can read it (last stride 1, 16-byte aligned start
/// and strides) and it is not a placeholder; `lse`: a 3-D `[b, h, s]` region read as `[b, h,
/// s, 1]` (unit stride along the rows, 4-byte aligned).
fn tensor4(g: &GlobalMem, region: &Region, lse: bool) -> Option<Tensor4> {
    let rank = if lse { 3 } else { 4 };
    if region.offset.len() != rank {
        return None;
    }
    let p = g.pieces.iter().find(|p| p.contains(region))?;
    if p.ptr == 0 {
        return None;
    }
    let es = g.dtype.size_bytes();
    let off: usize = (0..rank)
        .map(|d| (region.offset[d] - p.region.offset[d]) * p.strides[d])
        .sum();
    let ptr = p.ptr + (off * es) as u64;
    let mut st: Vec<i64> = p.strides.iter().map(|s| *s as i64).collect();
    let mut ext: Vec<usize> = region.extent.clone();
    if lse {
        st.push(1);
        ext.push(1);
    }
    // A dimension of extent 1 takes any stride; give it one past every other (what a dense
    // tensor would have), so that cuDNN sees a layout without aliasing.
    let span = (0..4)
        .filter(|d| ext[*d] > 1)
        .map(|d| st[d] * ext[d] as i64)
        .max()
        .unwrap_or(1);
    for d in 0..3 {
        if ext[d] == 1 {
            st[d] = span;
        }
    }
    if (ext[3] > 1 && st[3] != 1) || (lse && ext[2] > 1 && st[2] != 1) {
        return None;
    }
    st[3] = 1;
    let align = if lse { 4 } else { 16 };
    let aligned = ptr.is_multiple_of(align)
        && (0..3).all(|d| ext[d] == 1 || (st[d] as u64 * es as u64).is_multiple_of(align));
    aligned.then_some(Tensor4 {
        ptr,
        strides: [st[0], st[1], st[2], st[3]],
    })
}

/// A cuDNN block's call before direct binding, and what decides whether it may write its
/// output itself.
struct Block {
    call: mercury_kernels::cuda::SdpaCall,
    masked: usize,
    part: bool,
    accumulate: bool,
}

/// The cuDNN attention block at `(stage, op)` of a rank's launches, if it is one with a call.
fn cudnn_block(stages: &[Vec<ComputeLaunch>], at: (usize, usize)) -> Option<Block> {
    match stages.get(at.0).and_then(|s| s.get(at.1)) {
        Some(ComputeLaunch::Attention {
            launch,
            via: AttnVia::Cudnn(split),
        }) => split.call.map(|call| Block {
            call,
            masked: split.masked,
            part: split.part.is_some(),
            accumulate: launch.accumulate,
        }),
        _ => None,
    }
}

/// A block's call with the direct bindings found for it so far.
struct Candidate {
    at: (usize, usize),
    direct: DirectCall,
    /// The direct inputs (indices into `DirectPlan::inputs`) it reads.
    inputs: Vec<usize>,
}

/// The candidate of block `at`, made from its `call` on first use.
fn candidate(
    calls: &mut Vec<Candidate>,
    at: (usize, usize),
    call: mercury_kernels::cuda::SdpaCall,
) -> &mut Candidate {
    let i = match calls.iter().position(|c| c.at == at) {
        Some(i) => i,
        None => {
            calls.push(Candidate {
                at,
                direct: DirectCall {
                    call,
                    writes_output: false,
                    stats_scratch: false,
                },
                inputs: Vec::new(),
            });
            calls.len() - 1
        }
    };
    &mut calls[i]
}

/// `a` shifted by `b`'s offsets.
fn shifted(a: &Region, b: &Region) -> Region {
    Region {
        offset: a.offset.iter().zip(&b.offset).map(|(x, y)| x + y).collect(),
        extent: b.extent.clone(),
    }
}

impl CudaExecutor {
    /// Decides, for the memory bound now, which direct uses of every local rank apply (see
    /// the module docs) and points their cuDNN calls at it; the rest take the slot path.
    /// Called before each run; on a layout seen before it only recomputes addresses (and finds
    /// the cuDNN plan in the cache).
    pub(super) fn apply_direct(&mut self) -> Result<()> {
        for ri in 0..self.ranks.len() {
            let r = &mut self.ranks[ri];
            if !r.local || r.direct.is_empty() {
                continue;
            }
            r.skip_init.iter_mut().for_each(|x| *x = false);
            r.skip_out.iter_mut().for_each(|x| *x = false);
            // Only ranks on the main device (where the global buffers are) read them directly.
            let on_main = r.dev == 0;
            let Some(cudnn) = self.devs[r.dev].cudnn.clone().filter(|_| on_main) else {
                for st in r.stages.iter_mut() {
                    for op in st.iter_mut() {
                        if let ComputeLaunch::Attention {
                            via: AttnVia::Cudnn(split),
                            ..
                        } = op
                        {
                            split.direct = None;
                        }
                    }
                }
                continue;
            };
            // The candidate call per touched op: (stage, op) -> (call, writes output, lse
            // internal, the inputs it reads directly).
            let mut calls: Vec<Candidate> = Vec::new();
            for (ii, d) in r.direct.inputs.iter().enumerate() {
                let g = &self.globals[d.buffer];
                for (si, oi, k, view) in &d.readers {
                    let Some(b) = cudnn_block(&r.stages, (*si, *oi)) else {
                        continue;
                    };
                    let Some(mut t) = tensor4(g, &shifted(&d.region, view), false) else {
                        continue;
                    };
                    let c = candidate(&mut calls, (*si, *oi), b.call);
                    match k {
                        0 => {
                            t.ptr += (b.masked as i64 * t.strides[2] * 2) as u64;
                            c.direct.call.q = t;
                        }
                        1 => c.direct.call.k = t,
                        _ => c.direct.call.v = t,
                    }
                    c.inputs.push(ii);
                }
            }
            for d in &r.direct.outputs {
                let at = (d.stage, d.op);
                let Some(b) = cudnn_block(&r.stages, at) else {
                    continue;
                };
                if b.masked > 0 || b.part || b.accumulate {
                    continue;
                }
                let Some(o) = tensor4(&self.globals[d.o.1], &d.o.2, false) else {
                    continue;
                };
                let stats = match &d.lse {
                    Some((_, b, region)) => match tensor4(&self.globals[*b], region, true) {
                        Some(t) => Some(t),
                        None => continue,
                    },
                    None => None,
                };
                let c = candidate(&mut calls, at, b.call);
                c.direct.call.o = o;
                c.direct.writes_output = true;
                match stats {
                    Some(t) => c.direct.call.stats = t,
                    None => c.direct.stats_scratch = true,
                }
            }
            // The loaded library must take each call (its plan is built here on a new layout,
            // found in the cache after); a refused one keeps the slot path.
            let mut ok_inputs = vec![true; r.direct.inputs.len()];
            let mut applied: Vec<((usize, usize), DirectCall)> = Vec::new();
            for Candidate {
                at,
                direct: dc,
                inputs: ins,
            } in calls
            {
                let mut probe = dc.call;
                if !dc.writes_output {
                    probe.o = Tensor4::dense(256, [probe.b, probe.hq, probe.sq, probe.dv]);
                }
                if !dc.writes_output || dc.stats_scratch {
                    probe.stats = Tensor4::dense(256, [probe.b, probe.hq, probe.sq, 1]);
                }
                match cudnn.support(&probe) {
                    Ok(()) => applied.push((at, dc)),
                    Err(why) => {
                        tracing::debug!("direct binding refused by cuDNN ({why}); slot path");
                        for i in ins {
                            ok_inputs[i] = false;
                        }
                    }
                }
            }
            // An input slot is skipped only when every reader reads the bound memory.
            for (ii, d) in r.direct.inputs.iter().enumerate() {
                let all = d
                    .readers
                    .iter()
                    .all(|(si, oi, ..)| applied.iter().any(|(at, _)| *at == (*si, *oi)));
                if ok_inputs[ii] && all {
                    r.skip_init[d.slot] = true;
                }
            }
            for d in &r.direct.outputs {
                if applied
                    .iter()
                    .any(|(at, dc)| *at == (d.stage, d.op) && dc.writes_output)
                {
                    r.skip_out[d.o.0] = true;
                    if let Some((i, ..)) = d.lse {
                        r.skip_out[i] = true;
                    }
                }
            }
            // Readers whose call was applied read the bound memory; when their slot is still
            // initialised (another reader refused) they read the same values there.
            for (si, st) in r.stages.iter_mut().enumerate() {
                for (oi, op) in st.iter_mut().enumerate() {
                    if let ComputeLaunch::Attention {
                        via: AttnVia::Cudnn(split),
                        ..
                    } = op
                    {
                        split.direct = applied
                            .iter()
                            .find(|(at, _)| *at == (si, oi))
                            .map(|(_, dc)| Box::new(*dc));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
