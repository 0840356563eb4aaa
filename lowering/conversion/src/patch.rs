//! `commir.patch`: a library kernel on the stage's tiles, its results in temporaries (double
//! buffered when a shifted reduction sends them on). A causal attention tile is cut into the
//! blocks of its real positions (`causal.rs`): blocks entirely above the diagonal are skipped,
//! blocks below it run without a mask.

use crate::causal::{causal_blocks, mask_blocks, Block};
use crate::compute::StageCx;
use crate::context::{err, Event, Lowering};
use mercury_ir::{Attribute, Diagnostic, Location, ValueId};
use mercury_plan::{ComputeOp, DType, PatchArgs, PatchKind, SlotInit, View};

impl Lowering<'_> {
    /// Lowers one patch event of `cx`'s rank and stage.
    pub(crate) fn lower_patch(&mut self, cx: &mut StageCx, e: &Event) -> Result<(), Diagnostic> {
        let Event::Patch {
            kernel,
            inputs,
            outputs,
            attrs,
            loc,
        } = e
        else {
            return Ok(());
        };
        let Some(views) = cx.operands(inputs, loc)? else {
            return Err(err(loc, "patch input is not available: it is computed from a fully masked causal block the lowering leaves out"));
        };
        let shapes: Vec<Vec<usize>> = views.iter().map(|v| v.region.extent.clone()).collect();
        let segs = |i: usize| inputs.get(i).and_then(|v| cx.seq.get(v)).cloned();
        let offset = |i: usize| segs(i).and_then(|s| s.first().map(|x| x.pos)).unwrap_or(0);
        let documents = self.documents_of(attrs, loc)?;
        let (patch, out_shapes) = patch_kind(
            kernel,
            &shapes,
            attrs,
            documents,
            (offset(0), offset(1)),
            loc,
        )?;
        // A window or documents: the tile's (query run, key run) blocks at their real
        // positions, those the band empties for every batch skipped.
        let masked = match &patch {
            PatchKind::Attention { causal, mask, .. }
            | PatchKind::AttentionBwd { causal, mask, .. }
                if !mask.is_none() =>
            {
                Some((*causal, *mask))
            }
            _ => None,
        };
        let blocks = match (&patch, masked, segs(0), segs(1)) {
            (_, Some((causal, mask)), Some(q), Some(k)) => Some(
                mask_blocks(
                    &q,
                    &k,
                    mask.band(causal),
                    mask.is_static(),
                    mask.documents.is_some(),
                )
                .map_err(|m| err(loc, m))?,
            ),
            (_, Some(_), _, _) => {
                return Err(err(
                    loc,
                    "an attention patch with a window or documents needs the positions of its q and k tiles: give it tiles loaded from their buffers (a cast of one keeps them)",
                ))
            }
            // Causal attention: the tile's (query run, key run) blocks, empty ones skipped.
            (
                PatchKind::Attention { causal: true, .. }
                | PatchKind::AttentionBwd { causal: true, .. },
                None,
                Some(q),
                Some(k),
            ) => Some(causal_blocks(&q, &k).map_err(|m| err(loc, m))?),
            _ => None,
        };
        // A GEMM's product lies where its operands' rows and columns do (A's leading
        // dimensions, B's trailing ones): a causal mask of it needs those positions.
        if let (PatchKind::Gemm { .. }, [a, b], [o]) =
            (&patch, inputs.as_slice(), outputs.as_slice())
        {
            if let (Some(pa), Some(pb)) = (cx.positions.get(a), cx.positions.get(b)) {
                let rank = out_shapes.first().map_or(0, Vec::len);
                if let (Some(lead), Some(trail)) = (pa.split_last(), pb.split_first()) {
                    let p: Vec<Option<usize>> = lead.1.iter().chain(trail.1).copied().collect();
                    if p.len() == rank {
                        cx.positions.insert(*o, p);
                    }
                }
            }
        }
        let Some(blocks) = blocks else {
            return self.emit_patch(cx, kernel, outputs, patch, views, out_shapes);
        };
        let sq = shapes[0][shapes[0].len() - 2];
        let sk = shapes[1][shapes[1].len() - 2];
        // The patch of one block: the tile's patch with its offsets, masked (the tile's mask)
        // or not.
        let attention = |b: &Block| {
            let mut p = patch.clone();
            if let PatchKind::Attention {
                causal,
                q_offset,
                k_offset,
                mask,
                ..
            }
            | PatchKind::AttentionBwd {
                causal,
                q_offset,
                k_offset,
                mask,
                ..
            } = &mut p
            {
                *causal = *causal && b.masked;
                if !b.masked {
                    *mask = mercury_plan::AttnMask::default();
                }
                *q_offset = b.q_offset;
                *k_offset = b.k_offset;
            }
            p
        };
        match blocks.as_slice() {
            [] => {
                // Every block above the diagonal: nothing to compute, nothing to merge.
                for o in outputs {
                    cx.mask_out(*o);
                }
                Ok(())
            }
            [b] if b.q == (0, sq) && b.k == (0, sk) => {
                self.emit_patch(cx, kernel, outputs, attention(b), views, out_shapes)
            }
            _ if matches!(patch, PatchKind::AttentionBwd { .. }) => {
                self.emit_bwd_blocks(cx, outputs, &blocks, &attention, views, out_shapes)
            }
            _ => self.emit_blocks(cx, outputs, &blocks, &attention, views, out_shapes),
        }
    }

    /// One patch over whole tiles, its results in temporaries.
    fn emit_patch(
        &mut self,
        cx: &mut StageCx,
        kernel: &str,
        outputs: &[ValueId],
        patch: PatchKind,
        views: Vec<View>,
        out_shapes: Vec<Vec<usize>>,
    ) -> Result<(), Diagnostic> {
        let (r, ps) = (cx.r, cx.ps);
        let parity = ps % 2;
        // A GEMM writes a sent partial in the wire's type only where it can
        // (`mercury_plan::patch::gemm_writes`: not from f32 operands); else f32.
        let gemm_input = match (&patch, views.first()) {
            (PatchKind::Gemm { .. }, Some(a)) => Some(self.ranks[r].slots[a.slot].dtype),
            _ => None,
        };
        let writable = |d: DType| match gemm_input {
            Some(input) if !mercury_plan::patch::gemm_writes(input, d) => DType::F32,
            _ => d,
        };
        let mut outs = Vec::new();
        for (o, sh) in outputs.iter().zip(out_shapes) {
            let (parity, dtype) = match self.sent_values.get(o) {
                Some(d) => (parity, writable(*d)),
                None => (0, self.part_dtype.get(o).copied().unwrap_or(DType::F32)),
            };
            let s = match self.ranks[r].temps.get(&(*o, parity)) {
                Some(s) => *s,
                None => {
                    let s = self.ranks[r].slot(
                        format!("{kernel}.out{}.{parity}", outs.len()),
                        dtype,
                        sh,
                        SlotInit::Uninit,
                    );
                    self.ranks[r].temps.insert((*o, parity), s);
                    s
                }
            };
            let v = self.ranks[r].whole(s);
            cx.values.insert(*o, v.clone());
            outs.push(v);
        }
        self.ranks[r].stage(ps).compute.push(ComputeOp::Patch {
            patch,
            inputs: views,
            outputs: outs,
        });
        Ok(())
    }

    /// A causal attention tile cut into blocks: one patch per block on the rows and keys it
    /// covers. When the blocks cover every query row once they write the temporaries in place;
    /// otherwise the temporaries start empty (o = 0, lse = -inf) for this stage and every block
    /// merges into them. A reduction that alone reads the result merges the blocks straight
    /// into its accumulator instead (`reduce.rs`).
    fn emit_blocks(
        &mut self,
        cx: &mut StageCx,
        outputs: &[ValueId],
        blocks: &[Block],
        attention: &dyn Fn(&Block) -> PatchKind,
        views: Vec<View>,
        out_shapes: Vec<Vec<usize>>,
    ) -> Result<(), Diagnostic> {
        let (r, ps) = (cx.r, cx.ps);
        let sq = out_shapes[0][out_shapes[0].len() - 2];
        let mut rows: Vec<(usize, usize)> = blocks.iter().map(|b| b.q).collect();
        rows.sort_unstable();
        let once = rows.first().is_some_and(|f| f.0 == 0)
            && rows.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0)
            && rows.last().is_some_and(|l| l.0 + l.1 == sq);
        let parity = ps % 2;
        let mut outs = Vec::new();
        for (i, (o, sh)) in outputs.iter().zip(&out_shapes).enumerate() {
            let s = if once {
                let (parity, dtype) = match self.sent_values.get(o) {
                    Some(d) => (parity, *d),
                    None => (0, DType::F32),
                };
                match self.ranks[r].temps.get(&(*o, parity)) {
                    Some(s) => *s,
                    None => {
                        let s = self.ranks[r].slot(
                            format!("attention.out{i}.{parity}"),
                            dtype,
                            sh.clone(),
                            SlotInit::Uninit,
                        );
                        self.ranks[r].temps.insert((*o, parity), s);
                        s
                    }
                }
            } else {
                let init = if i == 0 {
                    SlotInit::Zero
                } else {
                    SlotInit::NegInf
                };
                self.ranks[r].slot(
                    format!("attention.blocks{i}.{ps}"),
                    DType::F32,
                    sh.clone(),
                    init,
                )
            };
            let v = self.ranks[r].whole(s);
            cx.values.insert(*o, v.clone());
            outs.push(v);
        }
        let qd = views[0].region.rank() - 2;
        let kd = views[1].region.rank() - 2;
        let mut ops = Vec::new();
        for b in blocks {
            let mut patch = attention(b);
            if let PatchKind::Attention { accumulate, .. } = &mut patch {
                *accumulate = !once;
            }
            let inputs = vec![
                narrow(&views[0], qd, b.q),
                narrow(&views[1], kd, b.k),
                narrow(&views[2], kd, b.k),
            ];
            let outputs = vec![narrow(&outs[0], qd, b.q), narrow(&outs[1], qd, b.q)];
            let st = self.ranks[r].stage(ps);
            ops.push((st.compute.len(), b.q));
            st.compute.push(ComputeOp::Patch {
                patch,
                inputs,
                outputs,
            });
        }
        if let Some(o) = outputs.first() {
            cx.blocks.insert(*o, ops);
        }
        Ok(())
    }
}

impl Lowering<'_> {
    /// A causal attention backward tile cut into blocks: every block adds its gradients into
    /// temporaries zeroed for this stage, dq on the block's query rows, dk and dv on its keys
    /// (several blocks add into one row or key), and a reduction adds the temporaries into
    /// its accumulators as it would a whole tile's. When no two blocks share a query row nor a
    /// key (a zigzag ring step is one block: half the queries and every key, or every query and
    /// half the keys), each block writes its gradients instead of adding them, and the
    /// temporaries take the type the gradients are summed or sent in (bf16 into a bf16
    /// gradient: the GPU patch's own output, as a whole tile's, `compute.rs`); what no block
    /// covers stays zero.
    fn emit_bwd_blocks(
        &mut self,
        cx: &mut StageCx,
        outputs: &[ValueId],
        blocks: &[Block],
        patch_of: &dyn Fn(&Block) -> PatchKind,
        views: Vec<View>,
        out_shapes: Vec<Vec<usize>>,
    ) -> Result<(), Diagnostic> {
        let (r, ps) = (cx.r, cx.ps);
        let disjoint = |mut ranges: Vec<(usize, usize)>| {
            ranges.sort_unstable();
            ranges.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0)
        };
        let written = disjoint(blocks.iter().map(|b| b.q).collect())
            && disjoint(blocks.iter().map(|b| b.k).collect());
        let mut outs = Vec::new();
        for (i, (o, sh)) in outputs.iter().zip(&out_shapes).enumerate() {
            let dtype = match (written, self.sent_values.get(o), self.part_dtype.get(o)) {
                (true, Some(d), _) | (true, None, Some(d)) => *d,
                _ => DType::F32,
            };
            let s = self.ranks[r].slot(
                format!("attention_bwd.blocks{i}.{ps}"),
                dtype,
                sh.clone(),
                SlotInit::Zero,
            );
            let v = self.ranks[r].whole(s);
            cx.values.insert(*o, v.clone());
            outs.push(v);
        }
        let qd = views[0].region.rank() - 2;
        let kd = views[1].region.rank() - 2;
        for b in blocks {
            let mut patch = patch_of(b);
            if !written {
                patch.fold(mercury_plan::CombineKind::Add);
            }
            // q, o, do and lse along the query rows (lse's sequence dimension is q's too: it
            // is q's tile without the head dim), k and v along the keys.
            let inputs = views
                .iter()
                .enumerate()
                .map(|(i, v)| match i {
                    1 | 2 => narrow(v, kd, b.k),
                    _ => narrow(v, qd, b.q),
                })
                .collect();
            let outputs = vec![
                narrow(&outs[0], qd, b.q),
                narrow(&outs[1], kd, b.k),
                narrow(&outs[2], kd, b.k),
            ];
            self.ranks[r].stage(ps).compute.push(ComputeOp::Patch {
                patch,
                inputs,
                outputs,
            });
        }
        Ok(())
    }
}

/// `v` restricted to `(offset, len)` along dimension `d`.
pub(crate) fn narrow(v: &View, d: usize, (off, len): (usize, usize)) -> View {
    let mut region = v.region.clone();
    region.offset[d] += off;
    region.extent[d] = len;
    View {
        slot: v.slot,
        region,
    }
}

impl Lowering<'_> {
    /// The plan's document boundaries (indices of the kernel's `commir.documents`, which the
    /// plan keeps in order) that a patch's `documents` attribute names: `@D` for queries and
    /// keys, or `[@Dq, @Dk]` (the verifier checked them).
    fn documents_of(
        &self,
        attrs: &[(String, Attribute)],
        loc: &Location,
    ) -> Result<Option<[usize; 2]>, Diagnostic> {
        let Some((_, a)) = attrs.iter().find(|(n, _)| n == "documents") else {
            return Ok(None);
        };
        let syms: Vec<&str> = match a {
            Attribute::Array(v) => v.iter().filter_map(Attribute::as_symbol).collect(),
            a => a.as_symbol().into_iter().chain(a.as_symbol()).collect(),
        };
        let index = |s: &str| self.k.documents.iter().position(|d| d.name == s);
        match syms.as_slice() {
            [q, k] => match (index(q), index(k)) {
                (Some(q), Some(k)) => Ok(Some([q, k])),
                _ => Err(err(
                    loc,
                    "'documents' names no commir.documents declaration",
                )),
            },
            _ => Err(err(loc, "'documents' must be @D or [@Dq, @Dk]")),
        }
    }
}

/// The plan patch for `kernel` on tiles of `shapes`, and its output shapes (from the patch's
/// spec). `offsets` are the sequence offsets of the first two inputs (attention's query and key
/// positions); `documents` the plan's boundaries its `documents` attribute names.
fn patch_kind(
    kernel: &str,
    shapes: &[Vec<usize>],
    attrs: &[(String, Attribute)],
    documents: Option<[usize; 2]>,
    offsets: (usize, usize),
    loc: &Location,
) -> Result<(PatchKind, Vec<Vec<usize>>), Diagnostic> {
    let spec = mercury_plan::patch::spec(kernel)
        .ok_or_else(|| err(loc, format!("no patch implementation for '{kernel}'")))?;
    let attr = |name: &str| attrs.iter().find(|(a, _)| a == name).map(|(_, v)| v);
    let bool_attr = |name: &str| attr(name).and_then(Attribute::as_bool);
    let float_attr = |name: &str| attr(name).and_then(Attribute::as_float);
    let ints_attr = |name: &str| attr(name).and_then(Attribute::as_int_array);
    (spec.build)(&PatchArgs {
        shapes,
        offsets,
        bool_attr: &bool_attr,
        float_attr: &float_attr,
        ints_attr: &ints_attr,
        documents,
    })
    .map_err(|m| err(loc, m))
}
