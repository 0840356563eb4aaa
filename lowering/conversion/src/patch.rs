//! `commir.patch`: a library kernel on the stage's tiles, its results in temporaries (double
//! buffered when a shifted reduction sends them on). Causal attention blocks entirely above
//! the diagonal are skipped.

use crate::compute::StageCx;
use crate::context::{err, Event, Lowering};
use mercury_ir::{Attribute, Diagnostic, Location};
use mercury_plan::{ComputeOp, DType, PatchKind, SlotInit, View};

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
        let (r, ps) = (cx.r, cx.ps);
        let views: Vec<View> = inputs
            .iter()
            .map(|v| {
                cx.values
                    .get(v)
                    .cloned()
                    .ok_or_else(|| err(loc, "patch input is not available"))
            })
            .collect::<Result<_, _>>()?;
        let shapes: Vec<Vec<usize>> = views.iter().map(|v| v.region.extent.clone()).collect();
        let parity = ps % 2;
        let offset = |i: usize| {
            inputs
                .get(i)
                .and_then(|v| cx.q_offsets.get(v))
                .copied()
                .unwrap_or(0)
        };
        let (patch, out_shapes) = patch_kind(kernel, &shapes, attrs, (offset(0), offset(1)), loc)?;
        // Causal blocks entirely above the diagonal are skipped.
        if let PatchKind::Attention {
            causal: true,
            q_offset,
            k_offset,
            ..
        } = patch
        {
            let q_rows = shapes[0].len().checked_sub(2).map_or(0, |d| shapes[0][d]);
            if k_offset >= q_offset + q_rows {
                for o in outputs {
                    cx.values.remove(o);
                }
                return Ok(());
            }
        }
        let mut outs = Vec::new();
        for (o, sh) in outputs.iter().zip(out_shapes) {
            let parity = if self.sent_values.contains(o) {
                parity
            } else {
                0
            };
            let s = match self.ranks[r].temps.get(&(*o, parity)) {
                Some(s) => *s,
                None => {
                    let s = self.ranks[r].slot(
                        format!("{kernel}.out{}.{parity}", outs.len()),
                        DType::F32,
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
}

/// The plan patch for `kernel` on tiles of `shapes`, and its output shapes. `offsets` are the
/// sequence offsets of the first two inputs (attention's query and key positions).
fn patch_kind(
    kernel: &str,
    shapes: &[Vec<usize>],
    attrs: &[(String, Attribute)],
    offsets: (usize, usize),
    loc: &Location,
) -> Result<(PatchKind, Vec<Vec<usize>>), Diagnostic> {
    match kernel {
        "gemm" => {
            let kd = *shapes[0].last().unwrap_or(&1);
            let m = shapes[0].iter().product::<usize>() / kd.max(1);
            let nn = shapes[1].iter().product::<usize>() / kd.max(1);
            Ok((PatchKind::Gemm { accumulate: false }, vec![vec![m, nn]]))
        }
        "attention" => {
            let q = &shapes[0];
            if !(q.len() == 4 && shapes[1].len() == 4 || q.len() == 3 && shapes[1].len() == 3) {
                return Err(err(loc, "attention tiles must be [batch, heads, sequence, head_dim] or [heads, sequence, head_dim]"));
            }
            let d = *q.last().unwrap_or(&1);
            let causal = attrs
                .iter()
                .any(|(a, v)| a == "causal" && v.as_bool() == Some(true));
            let scale = attrs
                .iter()
                .find(|(a, _)| a == "scale")
                .and_then(|(_, v)| v.as_float())
                .unwrap_or(1.0 / (d as f64).sqrt());
            Ok((
                PatchKind::Attention {
                    causal,
                    scale,
                    q_offset: offsets.0,
                    k_offset: offsets.1,
                    accumulate: false,
                },
                {
                    // The output takes v's head dim (which may differ from q's).
                    let mut o = q.clone();
                    if let (Some(last), Some(dv)) = (o.last_mut(), shapes[2].last()) {
                        *last = *dv;
                    }
                    vec![o, q[..q.len() - 1].to_vec()]
                },
            ))
        }
        other => Err(err(loc, format!("no patch implementation for '{other}'"))),
    }
}
