//! `commir.patch`: a library kernel on the stage's tiles, its results in temporaries (double
//! buffered when a shifted reduction sends them on). Causal attention blocks entirely above
//! the diagonal are skipped.

use crate::compute::StageCx;
use crate::context::{err, Event, Lowering};
use mercury_ir::{Attribute, Diagnostic, Location};
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
        // Instances with nothing to do (causal blocks entirely above the diagonal) are skipped.
        let q_rows = shapes[0].len().checked_sub(2).map_or(0, |d| shapes[0][d]);
        if patch.is_empty(q_rows) {
            for o in outputs {
                cx.values.remove(o);
            }
            return Ok(());
        }
        let mut outs = Vec::new();
        for (o, sh) in outputs.iter().zip(out_shapes) {
            let (parity, dtype) = match self.sent_values.get(o) {
                Some(d) => (parity, *d),
                None => (0, DType::F32),
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
}

/// The plan patch for `kernel` on tiles of `shapes`, and its output shapes (from the patch's
/// spec). `offsets` are the sequence offsets of the first two inputs (attention's query and key
/// positions).
fn patch_kind(
    kernel: &str,
    shapes: &[Vec<usize>],
    attrs: &[(String, Attribute)],
    offsets: (usize, usize),
    loc: &Location,
) -> Result<(PatchKind, Vec<Vec<usize>>), Diagnostic> {
    let spec = mercury_plan::patch::spec(kernel)
        .ok_or_else(|| err(loc, format!("no patch implementation for '{kernel}'")))?;
    let attr = |name: &str| attrs.iter().find(|(a, _)| a == name).map(|(_, v)| v);
    let bool_attr = |name: &str| attr(name).and_then(Attribute::as_bool);
    let float_attr = |name: &str| attr(name).and_then(Attribute::as_float);
    (spec.build)(&PatchArgs {
        shapes,
        offsets,
        bool_attr: &bool_attr,
        float_attr: &float_attr,
    })
    .map_err(|m| err(loc, m))
}
