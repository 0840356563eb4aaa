//! `reorder{outer=a inner=b}`: interchanges two perfectly nested loops. Refused when a
//! dependence may be carried by both loops (interchange could reverse it).

use crate::util::*;
use mercury_commir::deps;
use mercury_commir::kernel_pass;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `reorder`.
    pub struct Reorder = "reorder", "Interchange two perfectly nested loops", {
        outer: String => "axis of the outer loop",
        inner: String => "axis of the loop directly inside it",
    }
}

impl KernelPass for Reorder {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        sole_loop(m, &self.inner, "reorder")?;
        let outer = sole_loop(m, &self.outer, "reorder")?
            .ok_or_else(|| err_at(&m.loc, format!("reorder: no loop over '@{}'", self.outer)))?;
        let perfectly_nested =
            matches!(outer.body.as_slice(), [mercury_commir::Stmt::For(l)] if l.axis == self.inner);
        if !perfectly_nested {
            return Err(Diagnostic::error(
                outer.loc.clone(),
                format!(
                    "reorder: the loop over '@{}' must contain exactly the loop over '@{}'",
                    self.outer, self.inner
                ),
            ));
        }
        if let Some(l) = m.find_loop(&self.inner).and_then(|l| l.shift.as_ref()) {
            if *l == self.outer {
                return Err(Diagnostic::error(
                    outer.loc.clone(),
                    format!(
                        "reorder: '@{}' is shifted by '@{}' and must stay inside it",
                        self.inner, self.outer
                    ),
                ));
            }
        }
        let g = deps::build(m);
        if let Some((a, b)) = deps::blocks_interchange(&g, m, &self.outer, &self.inner) {
            if a.loc == b.loc && a.kind == b.kind {
                return Err(Diagnostic::error(a.loc.clone(), format!("reorder: this {} '@{}' touches the same tile in iterations that differ on both '@{}' and '@{}'; interchange could reverse their order", a.verb(), a.buffer, self.outer, self.inner)));
            }
            return Err(Diagnostic::error(a.loc.clone(), format!("reorder: this access to '@{}' depends on another (carried by both '@{}' and '@{}'); interchange could reverse it", a.buffer, self.outer, self.inner))
                .with_note(b.loc.clone(), "the other access is here"));
        }
        let k = kernel_mut(module, &m.name);
        let f = find_for_mut(k.body_mut(0), &self.outer).expect("loop");
        let mut inner = f.body_mut(0).pop().expect("inner loop");
        let inner_body = std::mem::take(inner.body_mut(0));
        // The loops trade places: each keeps its attributes and its location (errors on a loop
        // after the interchange point at the line that wrote it).
        std::mem::swap(&mut f.attrs, &mut inner.attrs);
        std::mem::swap(&mut f.loc, &mut inner.loc);
        inner.body_mut(0).extend(inner_body);
        f.body_mut(0).push(inner);
        Ok(())
    }
}
