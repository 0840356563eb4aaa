//! The rules of `commir.for`.

use super::ForOp;
use crate::model::{AxisKind, Scope};
use mercury_ir::{Diagnostic, Operation};
use std::ops::Deref;

impl<O: Deref<Target = Operation>> ForOp<O> {
    /// Checks the loop against its kernel (`scope`) and the enclosing loops (`stack`: axis and
    /// mesh level of each, outermost first): a declared axis that no enclosing loop iterates;
    /// a parallel loop over an existing, unused mesh level whose size is the axis' extent and
    /// whose axis is not a plain reduction; a shift by an enclosing parallel loop, never both.
    /// Returns (axis, parallel level, shifting axis).
    pub fn verify(
        &self,
        scope: &Scope,
        stack: &[(String, Option<usize>)],
    ) -> Result<(String, Option<usize>, Option<String>), Diagnostic> {
        let op = self.op();
        let err = |msg: String| Diagnostic::error(op.loc.clone(), msg);
        let axis = self.axis().unwrap_or_default();
        let ax = scope
            .axes
            .iter()
            .find(|a| a.name == axis)
            .ok_or_else(|| err(format!("'@{axis}' is not an axis of this kernel")))?;
        if stack.iter().any(|(a, _)| *a == axis) {
            return Err(err(format!(
                "axis '@{axis}' is already iterated by an enclosing loop"
            )));
        }
        let mesh = scope.mesh;
        let parallel = match self
            .read_parallel()
            .map_err(|m| err(format!("attribute 'parallel': {m}")))?
        {
            None => None,
            Some(l) => {
                let l = usize::try_from(l)
                    .ok()
                    .filter(|l| *l < mesh.shape.len())
                    .ok_or_else(|| {
                        err(format!(
                            "mesh level {l} does not exist: mesh '@{}' has {} levels",
                            mesh.name,
                            mesh.shape.len()
                        ))
                    })?;
                if ax.kind == AxisKind::Reduction {
                    return Err(err(format!("cannot parallelize '@{axis}': it is a plain reduction axis (mark it 'managed' to let the compiler combine partial results)")));
                }
                if ax.extent != mesh.shape[l] {
                    return Err(err(format!("parallel loop '@{axis}' has {} iterations but mesh level {l} has {} devices (tile first)", ax.extent, mesh.shape[l])));
                }
                if stack.iter().any(|(_, p)| *p == Some(l)) {
                    return Err(err(format!(
                        "mesh level {l} is already used by an enclosing parallel loop"
                    )));
                }
                Some(l)
            }
        };
        let shift = self.shift();
        if let Some(s) = &shift {
            if parallel.is_some() {
                return Err(err(format!(
                    "loop '@{axis}' cannot be both parallel and shifted"
                )));
            }
            if !stack.iter().any(|(a, p)| a == s && p.is_some()) {
                return Err(err(format!(
                    "loop '@{axis}' is shifted by '@{s}', which is not an enclosing parallel loop"
                )));
            }
        }
        Ok((axis, parallel, shift))
    }
}
