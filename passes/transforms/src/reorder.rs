//! `reorder{outer=a inner=b}`: interchanges two perfectly nested loops. Refused when a
//! dependence may be carried by both loops (interchange could reverse it).

use crate::deps;
use crate::util::*;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "reorder",
    summary: "Interchange two perfectly nested loops",
    options: &[
        PassOptionDef {
            name: "outer",
            help: "axis of the outer loop",
            default: None,
        },
        PassOptionDef {
            name: "inner",
            help: "axis of the loop directly inside it",
            default: None,
        },
        PassOptionDef {
            name: "kernel",
            help: "kernel to transform (default: all)",
            default: Some(""),
        },
    ],
    create: |o: &PassOptions| {
        Ok(Box::new(Reorder {
            outer: opt_name(o.get("outer")),
            inner: opt_name(o.get("inner")),
            kernel: o.get("kernel").to_string(),
        }))
    },
};

pub struct Reorder {
    pub outer: String,
    pub inner: String,
    pub kernel: String,
}

impl Pass for Reorder {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let m = model(module, &name)?;
            let outer = m.find_loop(&self.outer).ok_or_else(|| {
                Diagnostic::error(
                    m.loc.clone(),
                    format!("reorder: no loop over '@{}'", self.outer),
                )
            })?;
            let perfectly_nested = matches!(outer.body.as_slice(), [mercury_commir::Stmt::For(l)] if l.axis == self.inner);
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
            let g = deps::build(&m);
            if let Some((a, b)) = deps::blocks_interchange(&g, &self.outer, &self.inner) {
                return Err(Diagnostic::error(a.loc.clone(), format!("reorder: this access to '@{}' depends on another (carried by both '@{}' and '@{}'); interchange could reverse it", a.buffer, self.outer, self.inner))
                    .with_note(b.loc.clone(), "the other access is here"));
            }
            let k = kernel_mut(module, &name);
            let f = find_for_mut(k.body_mut(0), &self.outer).expect("loop");
            let mut inner = f.body_mut(0).pop().expect("inner loop");
            let inner_body = std::mem::take(inner.body_mut(0));
            let outer_attrs = f.attrs.clone();
            f.attrs = inner.attrs.clone();
            inner.attrs = outer_attrs;
            inner.body_mut(0).extend(inner_body);
            f.body_mut(0).push(inner);
            model(module, &name)?;
        }
        Ok(())
    }
}
