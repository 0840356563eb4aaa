//! GEMM epilogue fusion: a gemm patch whose result only feeds the elementwise program right
//! after it, when that program is an activation and/or a cast of the product, becomes one
//! gemm with an epilogue writing the program's output (cuBLASLt applies the activation and the
//! conversion to the output type in its epilogue, so the f32 product tile is neither written
//! nor read back). This is the `patch` primitive's "fused per tile where it follows a patch"
//! at its cheapest: the tensor-parallel MLP's `GeLU(X W1)` cast to bf16 (examples/mlp.mlir).
//!
//! Fused, per rank: `Patch gemm{accumulate = false} -> g` immediately followed, in the same
//! stage, by `Tile elementwise(g) -> w` whose program is `[cast]`, `[f]` or `[f, cast]` with
//! `f` a function the gemm epilogue computes ([`EPILOGUES`]), where the gemm's output slot is
//! accessed by nothing but such pairs (no transfer, other op or output piece reads it). Then
//! every pair of that slot is fused and the slot, now unused, is pruned with the others
//! (`deliver.rs`). A phase of `lower_kernel`, after the outputs are delivered. Anything else is left as it was: the fusion changes no numbers beyond the
//! rounding of the f32 product (the epilogue applies `f` to the f32 accumulator instead of to
//! its f32 copy in memory, which is the same value).

use crate::context::{Lowering, RankBuild};
use mercury_plan::tile::{Instr, UnaryFn};
use mercury_plan::{ComputeOp, OutputPiece, PatchKind, TileOp, View};
use std::collections::HashMap;

/// The activations a gemm epilogue computes (cuBLASLt's `CUBLASLT_EPILOGUE_GELU` is the tanh
/// form, [`UnaryFn::Gelu`]).
pub const EPILOGUES: &[UnaryFn] = &[UnaryFn::Gelu];

/// The epilogue `program` amounts to when it reads only the gemm's product (value 0):
/// `Some(None)` for a lone cast, `Some(Some(f))` for `f` with or without a cast after it.
fn as_epilogue(program: &[Instr]) -> Option<Option<UnaryFn>> {
    let act = |i: &Instr| match i {
        Instr::Unary { f, x: 0 } if EPILOGUES.contains(f) => Some(*f),
        _ => None,
    };
    match program {
        [Instr::Cast { x: 0, .. }] => Some(None),
        [one] => act(one).map(Some),
        [first, Instr::Cast { x: 1, .. }] => act(first).map(Some),
        _ => None,
    }
}

/// Where `(stage, index)` is a gemm followed by an elementwise program it can absorb: the
/// gemm's output view, the program's output view and the epilogue.
fn candidate(ops: &[ComputeOp], i: usize) -> Option<(View, View, Option<UnaryFn>)> {
    let ComputeOp::Patch {
        patch:
            PatchKind::Gemm {
                accumulate: false,
                epilogue: None,
            },
        outputs,
        ..
    } = &ops[i]
    else {
        return None;
    };
    let Some(ComputeOp::Tile {
        tile: TileOp::Elementwise { program, .. },
        inputs,
        output,
    }) = ops.get(i + 1)
    else {
        return None;
    };
    let [g] = outputs.as_slice() else {
        return None;
    };
    if inputs.as_slice() != std::slice::from_ref(g) || output.region.extent != g.region.extent {
        return None;
    }
    Some((g.clone(), output.clone(), as_epilogue(program)?))
}

impl Lowering<'_> {
    /// Fuses every eligible gemm + elementwise pair of every rank (see the module docs);
    /// `pieces` are the output pieces, `(rank, piece)`.
    pub(crate) fn fuse_gemm_epilogues(&mut self, pieces: &[(usize, OutputPiece)]) {
        let n = self.ranks.len();
        for (rb, outputs) in self
            .ranks
            .iter_mut()
            .zip(crate::deliver::per_rank(pieces, n))
        {
            fuse_rank(rb, &outputs);
        }
    }
}

/// Fuses every eligible gemm + elementwise pair of `rb`; `outputs` are the rank's output
/// pieces.
fn fuse_rank(rb: &mut RankBuild, outputs: &[&OutputPiece]) {
    // Accesses of each slot, and those made by the pairs.
    let mut accesses: HashMap<usize, usize> = HashMap::new();
    let mut in_pairs: HashMap<usize, usize> = HashMap::new();
    for st in rb.stages.values() {
        for (i, op) in st.compute.iter().enumerate() {
            let (r, w) = mercury_plan::verify::compute_access(op);
            for v in r.into_iter().chain(w) {
                *accesses.entry(v.slot).or_default() += 1;
            }
            if let Some((g, _, _)) = candidate(&st.compute, i) {
                // The gemm's write and the program's read.
                *in_pairs.entry(g.slot).or_default() += 2;
            }
        }
        for op in &st.comm {
            let (r, w) = mercury_plan::verify::comm_access(op);
            for v in r.into_iter().chain(w) {
                *accesses.entry(v.slot).or_default() += 1;
            }
        }
    }
    for o in outputs {
        *accesses.entry(o.src.slot).or_default() += 1;
    }
    for st in rb.stages.values_mut() {
        let mut i = 0;
        while i < st.compute.len() {
            let Some((g, out, epilogue)) = candidate(&st.compute, i) else {
                i += 1;
                continue;
            };
            if accesses.get(&g.slot) != in_pairs.get(&g.slot) {
                i += 1;
                continue;
            }
            st.compute.remove(i + 1);
            if let ComputeOp::Patch { patch, outputs, .. } = &mut st.compute[i] {
                *patch = PatchKind::Gemm {
                    accumulate: false,
                    epilogue,
                };
                *outputs = vec![out];
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::DType;

    #[test]
    fn epilogue_programs() {
        let gelu = || Instr::Unary {
            f: UnaryFn::Gelu,
            x: 0,
        };
        let cast = |x| Instr::Cast { to: DType::BF16, x };
        assert_eq!(as_epilogue(&[cast(0)]), Some(None));
        assert_eq!(as_epilogue(&[gelu()]), Some(Some(UnaryFn::Gelu)));
        assert_eq!(as_epilogue(&[gelu(), cast(1)]), Some(Some(UnaryFn::Gelu)));
        // SiLU has no cuBLASLt epilogue; a cast of the input, not of the GeLU, is not one.
        let silu = Instr::Unary {
            f: UnaryFn::Silu,
            x: 0,
        };
        assert_eq!(as_epilogue(&[silu]), None);
        assert_eq!(as_epilogue(&[gelu(), cast(0)]), None);
        assert_eq!(as_epilogue(&[cast(0), gelu()]), None);
        assert_eq!(as_epilogue(&[]), None);
    }
}
