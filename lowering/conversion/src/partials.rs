//! Received partials as the owner's GEMM operand. In a shift-reduce whose peers' partial tile
//! arrives before the owner computes its own share (`shift{offset=1}` on the reduction loop),
//! the owner merges the partial into a zeroed f32 accumulator and then accumulates its own gemm
//! on top: a combine kernel that reads and writes the f32 tile, and an f32 gemm output. Instead
//! the gemm accumulates straight onto the received tile (cuBLASLt `D = A B + C` with C = D, in
//! f32 and rounded once to the tile's type), and the output is delivered from there. This is
//! AsyncTP's "sum in the matmul" for the reduce-scatter half of the tensor-parallel MLP.
//!
//! Folded, per rank, when all of these hold (anything else is left as it was):
//! - `Combine{add, acc: [A], part: [P]}` with A and P whole slots of one shape, A f32 and
//!   zero-initialised, P written only by one receive in an earlier stage and read only by this
//!   combine;
//! - A is otherwise written only by one `gemm{accumulate, no epilogue}` in a stage after P's
//!   receive (before or after the combine: the sum commutes), and read only by output pieces;
//! - every output piece that reads A belongs to a buffer of P's element type (or P is f32), so
//!   rounding the sum to P's type is what delivery would do anyway.
//!
//! Then the combine goes, the gemm writes P, the output pieces read P, and A, now unused, is
//! pruned with the others (`deliver.rs`). The sum is the same: own product (f32) plus the
//! received partial, rounded once to the output type.

use crate::context::{Lowering, RankBuild};
use mercury_plan::{CombineKind, CommOp, ComputeOp, DType, OutputPiece, PatchKind, SlotInit, View};
use std::collections::HashMap;

/// Where a slot is accessed: (stage, index) of compute ops, (stage) of receives, other comm
/// accesses, output pieces.
#[derive(Default)]
struct Uses {
    compute: Vec<(usize, usize)>,
    recv_stages: Vec<usize>,
    other_comm: usize,
    outputs: Vec<usize>,
}

impl Lowering<'_> {
    /// Folds every eligible received partial of every rank (see the module docs); `pieces`
    /// are the output pieces, `(rank, piece)`.
    pub(crate) fn fold_received_partials(&mut self, pieces: &mut [(usize, OutputPiece)]) {
        let out_dtype: Vec<DType> = self.buffers.iter().map(|b| b.dtype).collect();
        let n = self.ranks.len();
        for (rb, mut mine) in self
            .ranks
            .iter_mut()
            .zip(crate::deliver::per_rank_mut(pieces, n))
        {
            fold_rank(rb, &mut mine, &out_dtype);
        }
    }
}

fn is_whole(rb: &RankBuild, v: &View) -> bool {
    v.region.offset.iter().all(|o| *o == 0) && v.region.extent == rb.slots[v.slot].shape
}

fn uses_of(rb: &RankBuild, outputs: &[&mut OutputPiece]) -> HashMap<usize, Uses> {
    let mut u: HashMap<usize, Uses> = HashMap::new();
    for (&s, st) in &rb.stages {
        for (i, op) in st.compute.iter().enumerate() {
            let (rd, wr) = mercury_plan::verify::compute_access(op);
            for v in rd.into_iter().chain(wr) {
                let e = &mut u.entry(v.slot).or_default().compute;
                if e.last() != Some(&(s, i)) {
                    e.push((s, i));
                }
            }
        }
        for op in &st.comm {
            let (rd, wr) = mercury_plan::verify::comm_access(op);
            for v in rd.into_iter().chain(wr) {
                let e = u.entry(v.slot).or_default();
                match op {
                    CommOp::Recv { .. } => e.recv_stages.push(s),
                    _ => e.other_comm += 1,
                }
            }
        }
    }
    for (i, o) in outputs.iter().enumerate() {
        u.entry(o.src.slot).or_default().outputs.push(i);
    }
    u
}

fn fold_rank(rb: &mut RankBuild, outputs: &mut [&mut OutputPiece], out_dtype: &[DType]) {
    loop {
        let uses = uses_of(rb, outputs);
        let Some((s, i, gemm, a, p)) = find_fold(rb, &uses, outputs, out_dtype) else {
            return;
        };
        let pv = rb.whole(p);
        if let Some(ComputeOp::Patch { outputs: gout, .. }) =
            rb.stages.get_mut(&gemm.0).map(|st| &mut st.compute[gemm.1])
        {
            *gout = vec![pv];
        }
        for &o in &uses[&a].outputs {
            outputs[o].src.slot = p;
        }
        rb.stages.get_mut(&s).expect("stage").compute.remove(i);
    }
}

/// The first foldable combine: (stage, index, the gemm's (stage, index), A, P).
fn find_fold(
    rb: &RankBuild,
    uses: &HashMap<usize, Uses>,
    outputs: &[&mut OutputPiece],
    out_dtype: &[DType],
) -> Option<(usize, usize, (usize, usize), usize, usize)> {
    for (&s, st) in &rb.stages {
        for (i, op) in st.compute.iter().enumerate() {
            let ComputeOp::Combine {
                kind: CombineKind::Add,
                acc,
                part,
            } = op
            else {
                continue;
            };
            let ([av], [pv]) = (acc.as_slice(), part.as_slice()) else {
                continue;
            };
            let (a, p) = (av.slot, pv.slot);
            let (sa, sp) = (&rb.slots[a], &rb.slots[p]);
            if a == p
                || !is_whole(rb, av)
                || !is_whole(rb, pv)
                || sa.shape != sp.shape
                || sa.dtype != DType::F32
                || sa.init != SlotInit::Zero
            {
                continue;
            }
            let (ua, up) = (&uses[&a], &uses[&p]);
            let received_before = matches!(up.recv_stages.as_slice(), [r] if *r < s);
            if !received_before
                || up.other_comm > 0
                || up.compute != [(s, i)]
                || !up.outputs.is_empty()
            {
                continue;
            }
            // A: this combine and exactly one accumulating gemm (in either order: the sum
            // commutes), which runs after P has arrived; otherwise only output pieces.
            let (gs, gi) = match ua.compute.as_slice() {
                [c, g] | [g, c] if *c == (s, i) && *g != (s, i) => g,
                _ => continue,
            };
            if *gs <= up.recv_stages[0] || ua.other_comm > 0 || !ua.recv_stages.is_empty() {
                continue;
            }
            let ComputeOp::Patch {
                patch:
                    PatchKind::Gemm {
                        accumulate: true,
                        epilogue: None,
                    },
                outputs: gout,
                ..
            } = &rb.stages[gs].compute[*gi]
            else {
                continue;
            };
            if gout.as_slice() != std::slice::from_ref(av) {
                continue;
            }
            let types_ok = ua
                .outputs
                .iter()
                .all(|&o| sp.dtype == DType::F32 || out_dtype[outputs[o].buffer] == sp.dtype);
            if types_ok {
                return Some((s, i, (*gs, *gi), a, p));
            }
        }
    }
    None
}
