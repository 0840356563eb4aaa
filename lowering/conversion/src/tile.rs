//! The compute ops (`commir.matmul`, the elementwise ops, `commir.row_reduce`): one plan
//! `ComputeOp::Tile` each, its result in a temporary of the result's element type
//! (double-buffered when a shifted reduction sends it on). An elementwise op whose operand is
//! the result of the elementwise program just before it in the stage, used nowhere else, joins
//! that program: a chain after a patch becomes one generated kernel over the patch's output
//! tile (its epilogue), and a store of the chain's result makes the program write the stored
//! tile directly (`store.rs`).
//!
//! A causal mask over a tile whose every key comes after every query masks everything: where
//! the body leaves such rows out (the softmax pattern, `mask.rs`), the instance and everything
//! computed from it are skipped, like the attention patch's empty blocks, so the block
//! contributes nothing to its reduction; elsewhere it is computed as written, or refused.

use crate::compute::StageCx;
use crate::context::{err, to_dtype, Event, Lowering};
use crate::order::Seg;
use mercury_commir::{Compute, MaskKind};
use mercury_ir::{Diagnostic, ValueId};
use mercury_plan::tile::{matmul_a_shape, matmul_batches, matmul_shape, Instr};
use mercury_plan::{ComputeOp, SlotInit, TileOp, View};

impl Lowering<'_> {
    /// Lowers one compute event of `cx`'s rank and stage.
    pub(crate) fn lower_tile(&mut self, cx: &mut StageCx, e: &Event) -> Result<(), Diagnostic> {
        let Event::Compute {
            op,
            inputs,
            output,
            ty,
            loc,
        } = e
        else {
            return Ok(());
        };
        let (r, ps) = (cx.r, cx.ps);
        // An operand of a skipped instance (a fully masked causal block) skips this one too.
        let Some(views) = cx.operands(inputs, loc)? else {
            cx.mask_out(*output);
            return Ok(());
        };
        let shapes: Vec<Vec<usize>> = views.iter().map(|v| v.region.extent.clone()).collect();
        let scattered = inputs.iter().any(|v| cx.scattered.contains(v));
        let pos = |i: usize| -> Vec<Option<usize>> {
            cx.positions
                .get(&inputs[i])
                .cloned()
                .filter(|p| p.len() == shapes[i].len())
                .unwrap_or_else(|| vec![Some(0); shapes[i].len()])
        };
        // Whether operand i's positions are known (loaded tiles and what is computed from them;
        // not a patch's output, whose positions the lowering does not follow).
        let known = |i: usize| {
            cx.positions
                .get(&inputs[i])
                .is_some_and(|p| p.len() == shapes[i].len())
        };
        let pos_known;
        let (tile, out_shape, out_pos) = match op {
            Compute::Matmul {
                transpose_a,
                transpose_b,
            } => {
                // Over both operands' batch dimensions (the verifier's rule): a is read as if
                // it had one-element dimensions for b's after its own.
                let outer = match (self.k.tiles.get(&inputs[0]), self.k.tiles.get(&inputs[1])) {
                    (Some(a), Some(b)) => mercury_commir::outer_batches(a, b),
                    _ => false,
                };
                let sa = matmul_a_shape(&shapes[0], &shapes[1], outer);
                let (mut pa, pb) = (pos(0), pos(1));
                // a's positions likewise: position 0 along the inserted dimensions.
                let at = pa.len() - 2;
                pa.splice(
                    at..at,
                    std::iter::repeat_n(Some(0), sa.len() - shapes[0].len()),
                );
                let s = matmul_shape(&sa, &shapes[1], *transpose_a, *transpose_b)
                    .map_err(|m| err(loc, m))?;
                pos_known = known(0) && known(1);
                let (ra, rb) = (pa.len() - 2, pb.len() - 2);
                // Batch positions from the operand the output takes each dimension from (b's
                // where a is broadcast over it).
                let dims = matmul_batches(&sa[..ra], &shapes[1][..rb]).map_err(|m| err(loc, m))?;
                let nb = dims.len();
                let mut p: Vec<Option<usize>> = (0..nb)
                    .map(|d| match (d + ra).checked_sub(nb) {
                        Some(i) if dims[d].1 != usize::MAX => pa[i],
                        _ => (d + rb).checked_sub(nb).map_or(Some(0), |i| pb[i]),
                    })
                    .collect();
                p.push(if *transpose_a { pa[ra + 1] } else { pa[ra] });
                p.push(if *transpose_b { pb[rb] } else { pb[rb + 1] });
                let t = TileOp::Matmul {
                    transpose_a: *transpose_a,
                    transpose_b: *transpose_b,
                    outer,
                };
                (t, s, p)
            }
            Compute::RowReduce(k) => {
                pos_known = known(0);
                let mut s = shapes[0].clone();
                s.pop();
                let mut p = pos(0);
                p.pop();
                (TileOp::RowReduce { reduce: *k }, s, p)
            }
            _ => {
                // The full operand (a binary op's other operand may be a row operand).
                let full = (0..shapes.len())
                    .max_by_key(|i| shapes[*i].iter().product::<usize>())
                    .unwrap_or(0);
                pos_known = known(full);
                let (s, p) = (shapes[full].clone(), pos(full));
                let instr = match op {
                    Compute::Unary(f) => Instr::Unary { f: *f, x: 0 },
                    Compute::Binary(f) => Instr::Binary { f: *f, a: 0, b: 1 },
                    Compute::Scale(by) => Instr::Scale { by: *by, x: 0 },
                    Compute::AddScalar(value) => Instr::AddScalar {
                        value: *value,
                        x: 0,
                    },
                    Compute::RotateHalf => Instr::RotateHalf { x: 0 },
                    Compute::Cast => Instr::Cast {
                        to: to_dtype(ty),
                        x: 0,
                    },
                    Compute::Mask(MaskKind::Causal) => {
                        // The mask needs the tile's real query and key positions: a value the
                        // lowering does not follow them for (a patch's output) would be masked
                        // as if it were the first block.
                        if !pos_known {
                            return Err(err(
                                loc,
                                "a causal mask needs its tile's query and key positions, and its operand is computed from a patch's output, whose positions the lowering does not follow; compute the scores with commir.matmul, or patch the whole attention (--patch)",
                            ));
                        }
                        match crate::mask::causal_mask(self.k, *output, &p, &s, scattered, loc)? {
                            Some(instr) => instr,
                            None => {
                                // Every key after every query, and the body leaves such rows
                                // out: nothing of this block is computed.
                                cx.mask_out(*output);
                                return Ok(());
                            }
                        }
                    }
                    Compute::Matmul { .. } | Compute::RowReduce(_) => unreachable!(),
                };
                // Operands broadcast over the result's leading dimensions (a norm's weight, a
                // rotary table), as the verifier found them.
                let out_tile = self.k.tiles.get(output);
                let trailing = (0..inputs.len())
                    .filter(|&i| match (self.k.tiles.get(&inputs[i]), out_tile) {
                        (Some(t), Some(o)) => mercury_commir::trailing_operand(t, o),
                        _ => false,
                    })
                    .collect();
                (
                    TileOp::Elementwise {
                        program: vec![instr],
                        trailing,
                    },
                    s,
                    p,
                )
            }
        };
        // A result a shifted reduction sends on is double-buffered, in the type it is sent in.
        let (parity, dtype) = match self.sent_values.get(output) {
            Some(d) => (ps % 2, *d),
            None => (0, to_dtype(ty)),
        };
        let slot = match self.ranks[r].temps.get(&(*output, parity)) {
            Some(s) if self.ranks[r].slots[*s].shape == out_shape => *s,
            _ => {
                let s = self.ranks[r].slot(
                    format!("{}.out.{parity}", tile.name()),
                    dtype,
                    out_shape.clone(),
                    SlotInit::Uninit,
                );
                self.ranks[r].temps.insert((*output, parity), s);
                s
            }
        };
        let out_view = self.ranks[r].whole(slot);
        let fused = matches!(tile, TileOp::Elementwise { .. })
            && self.fuse_elementwise(cx, inputs, &views, &tile, &out_view);
        if !fused {
            self.ranks[r].stage(ps).compute.push(ComputeOp::Tile {
                tile,
                inputs: views,
                output: out_view.clone(),
            });
        }
        // A sequence dimension taken from a dimension that is not one run (the last of a
        // transposed operand) is as scattered as a loaded one.
        let seq = out_pos.len().checked_sub(2).map(|d| (d, out_pos[d]));
        if scattered || matches!(seq, Some((_, None))) {
            cx.scattered.insert(*output);
        } else if let Some((d, Some(pos))) = seq {
            // A causal patch reading this tile takes its sequence positions from here.
            cx.seq.insert(
                *output,
                vec![Seg {
                    at: 0,
                    pos,
                    len: out_shape[d],
                }],
            );
        }
        if pos_known {
            cx.positions.insert(*output, out_pos);
        }
        cx.values.insert(*output, out_view);
        Ok(())
    }

    /// Appends the one-instruction program `tile` (on `inputs`, at `views`) to the elementwise
    /// program just before it in the stage when one of its operands is that program's result
    /// and used nowhere else; the fused program then writes `out`. False when it cannot.
    fn fuse_elementwise(
        &mut self,
        cx: &StageCx,
        inputs: &[ValueId],
        views: &[View],
        tile: &TileOp,
        out: &View,
    ) -> bool {
        let TileOp::Elementwise {
            program: new,
            trailing: new_trailing,
        } = tile
        else {
            return false;
        };
        let Some(ComputeOp::Tile {
            tile:
                TileOp::Elementwise {
                    program,
                    trailing: prev_trailing,
                },
            inputs: prev_inputs,
            output: prev_out,
        }) = self.ranks[cx.r].stage(cx.ps).compute.last_mut()
        else {
            return false;
        };
        let Some(k) = views.iter().position(|v| v == prev_out) else {
            return false;
        };
        if uses(cx, inputs[k]) != 1
            || prev_out.region.extent != out.region.extent
            || new_trailing.contains(&k)
        {
            return false;
        }
        // A rotation reads other elements of its operand's row: that must be an input, not a
        // value the program computes element by element.
        if new
            .iter()
            .any(|i| matches!(i, Instr::RotateHalf { x } if *x == k))
        {
            return false;
        }
        // Value numbers: the old inputs, the new ones (all but the fused), the old
        // instructions, the new one.
        let (pn, pk) = (prev_inputs.len(), program.len());
        let extra: Vec<usize> = (0..views.len()).filter(|&i| i != k).collect();
        let xe = extra.len();
        let mut joined: Vec<Instr> = program
            .iter()
            .map(|ins| ins.map_operands(|v| if v < pn { v } else { v + xe }))
            .collect();
        for ins in new {
            joined.push(ins.map_operands(|v| {
                if v == k {
                    pn + xe + pk - 1
                } else {
                    pn + extra.iter().position(|&i| i == v).unwrap_or(0)
                }
            }));
        }
        *program = joined;
        prev_trailing.extend(
            extra
                .iter()
                .enumerate()
                .filter(|(_, i)| new_trailing.contains(i))
                .map(|(j, _)| pn + j),
        );
        prev_inputs.extend(extra.iter().map(|&i| views[i].clone()));
        *prev_out = out.clone();
        true
    }
}

/// How many events of the stage read `v`.
pub(crate) fn uses(cx: &StageCx, v: ValueId) -> usize {
    uses_in(&cx.events, v)
}

/// How many operands of the stage's events after the one being lowered (`cx.at`) are `v`.
pub(crate) fn uses_after(cx: &StageCx, v: ValueId) -> usize {
    uses_in(cx.events.get(cx.at + 1..).unwrap_or(&[]), v)
}

fn uses_in(events: &[Event], v: ValueId) -> usize {
    events
        .iter()
        .map(|e| match e {
            Event::Compute { inputs, .. } | Event::Patch { inputs, .. } => {
                inputs.iter().filter(|x| **x == v).count()
            }
            Event::Reduce { values, .. } => values.iter().filter(|x| **x == v).count(),
            Event::Store { value, .. } => usize::from(*value == v),
            Event::Load { .. } => 0,
        })
        .sum()
}
