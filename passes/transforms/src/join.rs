//! `join{outer=a inner=b}`: merges two axes into one axis `a_b` (extent Ea * Eb): every buffer
//! binds them next to each other in one dimension (a then b), every access indexes them
//! plainly, and their loops are perfectly nested, or both absent, or the outer one alone around
//! whole inner tiles (removed: computed in one step when no dependence crosses it). The
//! inverse of `tile`; used to merge batch and heads before distributing them.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::ForOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_commir::{DimBinding, IndexExpr, Stmt};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `join`.
    pub struct Join = "join", "Merge two adjacent axes (and their loops) into one", {
        outer: String => "the outer axis",
        inner: String => "the inner axis",
        name: String = "" => "name of the joined axis (default <outer>_<inner>)",
    }
}

impl KernelPass for Join {
    /// A buffer whose two dimensions are joined carries its placement on the one joined
    /// dimension: the same positions per device, written another way.
    fn keeps_output_placements(&self) -> bool {
        false
    }

    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let name_joined = if self.name.is_empty() {
            fresh_name(m, &format!("{}_{}", self.outer, self.inner))
        } else {
            self.name.clone()
        };
        let kname = m.name.clone();
        let err = |msg: String| Diagnostic::error(m.loc.clone(), format!("join: {msg}"));
        let (a, b) = (
            m.axis(&self.outer)
                .ok_or_else(|| err(format!("'@{}' is not an axis", self.outer)))?,
            m.axis(&self.inner)
                .ok_or_else(|| err(format!("'@{}' is not an axis", self.inner)))?,
        );
        if a.name == b.name {
            return Err(Diagnostic::error(
                a.loc.clone(),
                format!(
                    "join: cannot join '@{}' with itself (outer and inner must be two different axes)",
                    a.name
                ),
            ));
        }
        if a.kind != b.kind {
            return Err(Diagnostic::error(
                b.loc.clone(),
                format!(
                    "join: '@{}' is {} but '@{}' is {} (joined axes are of one kind)",
                    a.name,
                    a.kind.keyword(),
                    b.name,
                    b.kind.keyword()
                ),
            )
            .with_note(a.loc.clone(), format!("'@{}' is declared here", a.name)));
        }
        if m.axis(&name_joined).is_some() || m.buffer(&name_joined).is_some() {
            return Err(err(format!("the name '@{}' is already taken", name_joined)));
        }
        for buf in &m.buffers {
            let (ua, ub) = (buf.uses_axis(&a.name), buf.uses_axis(&b.name));
            if ua != ub {
                return Err(Diagnostic::error(
                    buf.loc.clone(),
                    format!(
                        "join: '@{}' uses only one of '@{}' and '@{}'",
                        buf.name, a.name, b.name
                    ),
                ));
            }
            if ua {
                let same_dim = buf.dims.iter().any(|d| matches!(d, DimBinding::Axes(ax) if ax.windows(2).any(|w| w[0] == a.name && w[1] == b.name)));
                let adjacent_dims = buf.dims.windows(2).zip(buf.sharding.windows(2)).any(|(w, s)| {
                    matches!((&w[0], &w[1]), (DimBinding::Axes(x), DimBinding::Axes(y)) if x.as_slice() == [a.name.clone()] && y.as_slice() == [b.name.clone()]) && s[1].is_empty()
                });
                if !same_dim && !adjacent_dims {
                    return Err(Diagnostic::error(buf.loc.clone(), format!("join: '@{}' does not bind '@{}' directly before '@{}' (in one dimension, or as two adjacent dimensions of their own with the inner one unsharded)", buf.name, a.name, b.name)));
                }
            }
        }
        let mut bad = None;
        m.walk(&mut |s, _| {
            if let Stmt::Load { access, .. }
            | Stmt::Reduce { access, .. }
            | Stmt::Store { access, .. } = s
            {
                for e in &access.indices {
                    let ax = e.axes();
                    if (ax.contains(&a.name.as_str()) || ax.contains(&b.name.as_str()))
                        && e.as_axis().is_none()
                        && bad.is_none()
                    {
                        bad = Some(access.loc.clone());
                    }
                }
            }
        });
        if let Some(l) = bad {
            return Err(Diagnostic::error(
                l,
                "join: an index here is not a plain axis".to_string(),
            ));
        }
        let (la, lb) = (
            sole_loop(m, &a.name, "join")?,
            sole_loop(m, &b.name, "join")?,
        );
        // A parallel or shifted loop carries a mapping onto the mesh that the joined loop
        // would not have (an inner `parallel(0)` loop was dropped, its work replicated).
        if let Some(l) = [la, lb]
            .into_iter()
            .flatten()
            .find(|l| l.parallel.is_some() || l.shift.is_some())
        {
            return Err(Diagnostic::error(
                l.loc.clone(),
                format!(
                    "join: loops must be plain sequential loops, and the loop over '@{}' is {}",
                    l.axis,
                    if l.parallel.is_some() {
                        "parallel"
                    } else {
                        "shifted"
                    }
                ),
            ));
        }
        match (la, lb) {
            (None, None) => {}
            (Some(x), Some(_)) if matches!(x.body.as_slice(), [Stmt::For(y)] if y.axis == b.name) => {}
            // `tile` of an axis without a loop leaves a loop over the outer axis around whole
            // inner tiles; joining them back removes the loop. That computes every block in one
            // tile, which is what the loop computed when no dependence crosses its iterations
            // (reductions of one kind commute and are no dependence).
            (Some(x), None) => {
                let g = mercury_commir::deps::build(m);
                let carried = g.edge_indices().find_map(|e| {
                    let (p, q) = g.edge_endpoints(e)?;
                    g[e].carried.contains(&a.name).then(|| (&g[p], &g[q]))
                });
                if let Some((p, q)) = carried {
                    let d = Diagnostic::error(
                        p.loc.clone(),
                        format!(
                            "join: '@{}' has a loop and '@{}' none, so joining them computes every iteration of the loop at once; this {} '@{}' touches the same tile as {} in different iterations of '@{}', so their order would be lost",
                            a.name,
                            b.name,
                            p.verb(),
                            p.buffer,
                            if p.loc == q.loc && p.kind == q.kind { "itself" } else { "the access at the note" },
                            a.name
                        ),
                    )
                    .with_note(x.loc.clone(), "the loop is here");
                    return Err(if p.loc == q.loc && p.kind == q.kind {
                        d
                    } else {
                        d.with_note(q.loc.clone(), "the other access is here")
                    });
                }
            }
            _ => {
                return Err(err(format!(
                    "the loops over '@{}' and '@{}' must be perfectly nested, or both absent, or the outer one alone",
                    a.name, b.name
                )))
            }
        }
        // The joined axis' smallest block: whole inner ranges when the outer axis asks for
        // blocks of its own, else the inner axis' smallest block (one (batch, head) pair when
        // neither asks for more).
        let min = if a.min_block > 1 {
            a.min_block * b.extent
        } else {
            b.min_block.max(1)
        };
        let (ext, kind) = (a.extent * b.extent, a.kind);
        let loc = a.loc.clone();
        let k = kernel_mut(module, &kname);
        let body = k.body_mut(0);
        if let Some(p) = axis_position(body, &self.inner) {
            body.remove(p);
        }
        let pos = axis_position(body, &self.outer).expect("axis");
        body[pos] = new_axis(&name_joined, ext, kind, min.min(ext), &loc);
        for mut op in buffers_mut(body) {
            let mut d = dims(&op);
            let mut sh = sharding(&op);
            let pair = d.windows(2).position(|w| matches!((&w[0], &w[1]), (DimBinding::Axes(x), DimBinding::Axes(y)) if x.as_slice() == [self.outer.clone()] && y.as_slice() == [self.inner.clone()]));
            if let Some(p) = pair {
                // Two adjacent dimensions become one.
                d.splice(p..p + 2, [DimBinding::Axes(vec![name_joined.clone()])]);
                sh.remove(p + 1);
            } else {
                for dd in d.iter_mut() {
                    if let DimBinding::Axes(ax) = dd {
                        if let Some(p) = ax.iter().position(|x| *x == self.outer) {
                            ax.splice(p..p + 2, [name_joined.clone()]);
                        }
                    }
                }
            }
            op.set_dims(d);
            set_sharding(&mut op, &sh);
        }
        let (o, i, n) = (self.outer.clone(), self.inner.clone(), name_joined.clone());
        rewrite_indices(body, &mut vec![], &mut |ix| {
            let p = ix.iter().position(|e| e.as_axis() == Some(&o))?;
            (ix.get(p + 1).and_then(|e| e.as_axis()) == Some(i.as_str())).then(|| {
                let mut ix = ix.to_vec();
                ix.splice(p..p + 2, [IndexExpr::axis(&n)]);
                ix
            })
        });
        if lb.is_none() {
            inline_loop(body, &self.outer);
        } else if let Some(f) = find_for_mut(body, &self.outer) {
            let mut inner = f.body_mut(0).pop().expect("inner loop");
            let inner_body = std::mem::take(inner.body_mut(0));
            ForOp::cast(&mut *f)
                .expect("loop")
                .set_axis(name_joined.as_str());
            f.body_mut(0).extend(inner_body);
        }
        Ok(())
    }
}

/// Replaces the (first) `commir.for` over `axis` in `ops` by its body; false if there is none.
fn inline_loop(ops: &mut Vec<Operation>, axis: &str) -> bool {
    for i in 0..ops.len() {
        if ForOp::cast(&ops[i]).is_some_and(|f| f.axis().as_deref() == Some(axis)) {
            let body = std::mem::take(ops[i].body_mut(0));
            ops.splice(i..=i, body);
            return true;
        }
        if ForOp::cast(&ops[i]).is_some() && inline_loop(ops[i].body_mut(0), axis) {
            return true;
        }
    }
    false
}
