//! `shard{buffer=K axis=j level=L placement=P}`: places buffer K sharded over mesh level L along
//! the dimension bound to axis j. Without `level`, the level is the one of the parallel loop
//! over j, or of the parallel loop that shifts the loop over j. `placement` says how the level
//! splits the dimension (block, zigzag, striped(B)); a buffer already sharded so over L gets
//! that split.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::{Kernel, Placement};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `shard`.
    pub struct Shard = "shard", "Shard a buffer over a mesh level along the dimension of an axis", {
        buffer: String => "the buffer",
        axis: String => "the axis whose dimension is split",
        level: Option<Level> = "" => "mesh level, number or name (default: from the loop over the axis)",
        placement: PlacementOption = "" => "how the level splits the dimension: block (default), zigzag or striped(B)",
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
                // After `distribute` the loops over the axis cannot say which level: ask for it.
                if loops_over(m, &self.axis).len() > 1 {
                    return Err(err_at(
                        &buf.loc,
                        format!("shard: several loops iterate '@{}' (after distribute), so none gives the mesh level: give level=", self.axis),
                    ));
                }
                // At most one loop iterates the axis now (refused above otherwise).
                let lp = loops_over(m, &self.axis).first().copied().ok_or_else(|| {
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
        let mut p = buf.placement();
        if p.levels[dim].contains(&level) {
            match self.placement.0 {
                Some(split) if split != p.split(level) => {
                    p.splits.insert(level, split);
                }
                _ => return Ok(()), // already placed so
            }
        } else if p.levels.iter().flatten().any(|l| *l == level) {
            return Err(Diagnostic::error(
                buf.loc.clone(),
                format!(
                    "shard: '@{}' is already sharded over mesh level {level}",
                    self.buffer
                ),
            ));
        } else {
            p.levels[dim].push(level);
            if let Some(split) = self.placement.0 {
                p.splits.insert(level, split);
            }
        }
        let p = Placement::new(p.levels, p.splits);
        keep_output_contract("shard", buf, &p)?;
        mercury_commir::model::check_placement(&self.buffer, &p, &m.shape(buf), &m.mesh)
            .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("shard: {e}")))?;
        let k = kernel_mut(module, &m.name);
        let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
        set_placement(&mut op.expect("buffer"), &p);
        Ok(())
    }
}
