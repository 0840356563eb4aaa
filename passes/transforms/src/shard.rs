//! `shard{buffer=K axis=j level=L}`: places buffer K sharded over mesh level L along the
//! dimension bound to axis j. Without `level`, the level is the one of the parallel loop over
//! j, or of the parallel loop that shifts the loop over j.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `shard`.
    pub struct Shard = "shard", "Shard a buffer over a mesh level along the dimension of an axis", {
        buffer: String => "the buffer",
        axis: String => "the axis whose dimension is split",
        level: Option<Level> = "" => "mesh level, number or name (default: from the loop over the axis)",
    }
}

impl KernelPass for Shard {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let buf = m.buffer(&self.buffer).ok_or_else(|| {
            err_at(
                &m.loc,
                format!("shard: '@{}' is not a buffer of '@{}'", self.buffer, m.name),
            )
        })?;
        let dim = buf.dim_of_axis(&self.axis).ok_or_else(|| {
            err_at(
                &buf.loc,
                format!(
                    "shard: '@{}' is not bound to axis '@{}'",
                    self.buffer, self.axis
                ),
            )
        })?;
        let level = match &self.level {
            Some(l) => l
                .resolve(&m.mesh)
                .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("shard: {e}")))?,
            None => {
                let lp = m.find_loop(&self.axis).ok_or_else(|| {
                    err_at(
                        &buf.loc,
                        format!(
                            "shard: no loop over '@{}' to take a mesh level from (give level=)",
                            self.axis
                        ),
                    )
                })?;
                match (lp.parallel, &lp.shift) {
                    (Some(l), _) => l,
                    (None, Some(by)) => m.find_loop(by).and_then(|p| p.parallel).expect("shift by a parallel loop"),
                    _ => return Err(Diagnostic::error(lp.loc.clone(), format!("shard: the loop over '@{}' is neither parallel nor shifted (give level=)", self.axis))),
                }
            }
        };
        let mut s = buf.sharding.clone();
        if s[dim].contains(&level) {
            return Ok(()); // already placed so
        }
        if s.iter().flatten().any(|l| *l == level) {
            return Err(Diagnostic::error(
                buf.loc.clone(),
                format!(
                    "shard: '@{}' is already sharded over mesh level {level}",
                    self.buffer
                ),
            ));
        }
        s[dim].push(level);
        mercury_commir::model::check_sharding(&self.buffer, &s, &m.shape(buf), &m.mesh)
            .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("shard: {e}")))?;
        let k = kernel_mut(module, &m.name);
        let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
        set_sharding(&mut op.expect("buffer"), &s);
        Ok(())
    }
}
