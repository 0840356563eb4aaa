//! `shift{axis=j by=i}`: staggers the sequential loop over `j` by the parallel loop over `i`:
//! the rank at position p of i's mesh level touches piece (j + p + offset) mod J at step j
//! (`offset` defaults to 0): every access
//! inside the loop gets the shifted index. Accesses to buffers indexed by j but not by i (shared
//! by the ranks) are the ones that can need communication. A shifted read becomes a ring of peer transfers once the buffer is sharded
//! (`shard`); a shifted reduction passes partial results around (shift-reduce). A plain store
//! that would need communication is refused. After `distribute`, `nth` picks which of the
//! loops over `j` to shift (each can have its own offset).

use crate::util::*;
use mercury_commir::ops::ForOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_commir::{deps, kernel_pass};
use mercury_commir::{ForLoop, IndexExpr, Stmt};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `shift`.
    pub struct Shift = "shift", "Stagger a sequential loop by a parallel loop (ranks consume shared data in shifted order)", {
        axis: String => "the sequential loop's axis",
        by: String => "the enclosing parallel loop's axis",
        offset: usize = "0" => "rank p starts at piece (p + offset) mod n; 1 puts a shift-reduce's own piece last, so that every partial's transfer overlaps a computation",
        nth: Option<usize> = "" => "which loop over the axis, from 0 in program order, when distribute left several (required then)",
    }
}

impl Shift {
    /// The loop shifted, `lp`, must run inside the parallel loop over `by`: the rank's
    /// position there is what staggers it.
    fn check_enclosed(&self, m: &Kernel, lp: &ForLoop) -> Result<(), Diagnostic> {
        let refuse = |msg: String| Err(err_at(&lp.loc, format!("shift: {msg}")));
        // Located at the loop over `by` where there is one (else at the shifted loop).
        let not_parallel = || {
            let at = m.find_loop(&self.by).map_or(&lp.loc, |l| &l.loc);
            Err(err_at(
                at,
                format!(
                    "shift: '@{}' is not a parallel loop (parallelize it first: the ranks' positions in it stagger '@{}')",
                    self.by, self.axis
                ),
            ))
        };
        let mut enclosing = None;
        let mut inside = false;
        m.walk(&mut |s, stack| {
            if let Stmt::For(l) = s {
                if std::ptr::eq(l, lp) {
                    enclosing = stack.iter().find(|e| e.axis == self.by).copied();
                } else if l.axis == self.by && stack.iter().any(|e| std::ptr::eq(*e, lp)) {
                    inside = true;
                }
            }
        });
        let around = "a shifted loop runs inside the loop it is shifted by";
        match (enclosing, m.find_loop(&self.by)) {
            (Some(e), _) if e.parallel.is_some() => Ok(()),
            (Some(_), _) | (None, None) => not_parallel(),
            (None, Some(l)) if l.parallel.is_none() => not_parallel(),
            (None, Some(_)) if inside => refuse(format!(
                "the parallel loop over '@{by}' is inside the loop over '@{axis}', not around it: {around} (interchange them first: reorder{{outer={axis} inner={by}}})",
                by = self.by,
                axis = self.axis
            )),
            (None, Some(_)) => refuse(format!(
                "the parallel loop over '@{}' does not enclose the loop over '@{}': {around}",
                self.by, self.axis
            )),
        }
    }
}

impl KernelPass for Shift {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let kloc = m.loc.clone();
        let loops = loops_over(m, &self.axis);
        let nth = match (self.nth, loops.len()) {
            (_, 0) => {
                return Err(err_at(
                    &kloc,
                    format!("shift: there is no loop over '@{}'", self.axis),
                ))
            }
            (Some(n), count) if n >= count => {
                return Err(err_at(
                    &loops[0].loc,
                    format!(
                        "shift: nth={n}, but {count} loop(s) iterate '@{}'",
                        self.axis
                    ),
                ))
            }
            (Some(n), _) => n,
            (None, 1) => 0,
            (None, count) => {
                return Err(Diagnostic::error(
                    loops[1].loc.clone(),
                    format!("shift: {count} loops iterate '@{}' (after distribute); say which with nth=0..{}", self.axis, count - 1),
                )
                .with_note(loops[0].loc.clone(), "the first loop is here"))
            }
        };
        let lp = loops[nth];
        if lp.parallel.is_some() {
            return Err(Diagnostic::error(
                lp.loc.clone(),
                format!(
                    "shift: the loop over '@{}' is parallel; shift a sequential loop",
                    self.axis
                ),
            ));
        }
        if lp.shift.is_some() {
            return Err(Diagnostic::error(
                lp.loc.clone(),
                format!("shift: the loop over '@{}' is already shifted", self.axis),
            ));
        }
        self.check_enclosed(m, lp)?;
        let (steps, ranks) = (m.extent(&self.axis), m.extent(&self.by));
        if steps != ranks {
            return Err(Diagnostic::error(lp.loc.clone(), format!("shift: '@{}' has {steps} steps but '@{}' spreads over {ranks} ranks; tile it to {ranks} first", self.axis, self.by)));
        }
        // The shift must reach a buffer shared across the ranks.
        let mut shared = false;
        let mut store_err = None;
        m.walk(&mut |s, stack| {
            if !stack.iter().any(|l| std::ptr::eq(*l, lp)) {
                return;
            }
            let (acc, is_store) = match s {
                Stmt::Load { access, .. } | Stmt::Reduce { access, .. } => (access, false),
                Stmt::Store { access, .. } => (access, true),
                _ => return,
            };
            let buf = m.buffer(&acc.buffer).expect("buffer");
            if buf.uses_axis(&self.axis) && !buf.uses_axis(&self.by) {
                shared = true;
                if is_store && store_err.is_none() {
                    store_err = Some(acc.loc.clone());
                }
            }
        });
        if let Some(l) = store_err {
            return Err(Diagnostic::error(l, format!("shift: this store into a buffer shared across '@{}' would need communication (use a reduction)", self.by)));
        }
        if !shared {
            return Err(Diagnostic::error(
                lp.loc.clone(),
                format!(
                    "shift: the loop over '@{}' indexes no buffer shared across '@{}'",
                    self.axis, self.by
                ),
            ));
        }
        // Each rank runs the iterations in another order: a dependence between two of them
        // (stores of one tile, the last winning; a store and a load) would be reversed on
        // some rank. Reductions of one kind commute.
        let lp_id = m.loops().iter().position(|l| std::ptr::eq(*l, lp));
        let g = deps::build(m);
        let dep = lp_id.and_then(|i| deps::carried_within(&g, m, &self.axis, i));
        if let Some((a, b)) = dep {
            return Err(deps::order_error("shift: ", &self.axis, (a, b)));
        }
        let k = kernel_mut(module, &m.name);
        let (axis, by_axis) = (self.axis.clone(), self.by.clone());
        let offset = (self.offset % steps.max(1)) as i64;
        let f = find_nth_for_mut(k.body_mut(0), &axis, &mut nth.clone()).expect("loop");
        ForOp::cast(&mut *f)
            .expect("loop")
            .set_shift(by_axis.as_str());
        // The iteration order is staggered for every access in the loop (a permutation of
        // the iterations); only the shared buffers' accesses will need communication.
        rewrite_indices(f.body_mut(0), &mut vec![axis.clone()], &mut |ix| {
            ix.iter().any(|e| e.as_axis() == Some(&axis)).then(|| {
                ix.iter()
                    .map(|e| {
                        if e.as_axis() == Some(&axis) {
                            IndexExpr::axis(&axis).shifted_by(&by_axis, offset, steps as i64)
                        } else {
                            e.clone()
                        }
                    })
                    .collect()
            })
        });
        Ok(())
    }
}
