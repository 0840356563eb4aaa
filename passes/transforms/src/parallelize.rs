//! `parallelize{axis=i level=L}`: distributes the iterations of the loop over `i` across mesh
//! level L (the loop needs exactly as many iterations as the level has devices: tile first).
//! Default placement: every input and temporary buffer indexed by the axis becomes sharded over
//! L along that dimension; the others stay as they are (replicated unless placed otherwise).
//! Outputs (`out`, `inout`) keep their declared placement, a contract with the caller: each
//! rank computes the tiles its loops give it and the lowering delivers them as declared (a
//! final gather or point-to-point delivery, in the plan and so priced by the cost model). With
//! `placement=zigzag` (or `striped(B)`) level L splits those dimensions that way (head-tail
//! chunks for load-balanced causal attention).

use crate::util::*;
use mercury_commir::deps;
use mercury_commir::kernel_pass;
use mercury_commir::ops::ForOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::DimBinding;
use mercury_commir::{Kernel, Placement};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `parallelize`.
    pub struct Parallelize = "parallelize", "Map a loop onto a mesh level and shard the buffers it indexes", {
        axis: String => "the loop's axis",
        level: Level => "mesh level: its number (0 = slowest) or its name",
        shard: bool = "true" => "shard the buffers the axis indexes",
        placement: PlacementOption = "" => "how the level splits them: block (default), zigzag or striped(B)",
    }
}

impl KernelPass for Parallelize {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        sole_loop(m, &self.axis, "parallelize")?;
        let k = kernel_mut(module, &m.name);
        let kloc = k.loc.clone();
        let axis = m.axis(&self.axis).ok_or_else(|| {
            err_at(
                &kloc,
                format!(
                    "parallelize: '@{}' is not an axis of '@{}'",
                    self.axis, m.name
                ),
            )
        })?;
        if !m.buffers.iter().any(|b| b.uses_axis(&self.axis)) {
            return Err(Diagnostic::error(
                axis.loc.clone(),
                format!(
                    "parallelize: no buffer uses '@{}', so distributing it does nothing",
                    self.axis
                ),
            ));
        }
        let f = find_for_mut(k.body_mut(0), &self.axis)
            .and_then(ForOp::cast)
            .ok_or_else(|| {
                err_at(
                    &kloc,
                    format!(
                        "parallelize: there is no loop over '@{}' (tile it first)",
                        self.axis
                    ),
                )
            })?;
        let mut f = f;
        let floc = f.op().loc.clone();
        let level = self
            .level
            .resolve(&m.mesh)
            .map_err(|e| Diagnostic::error(floc.clone(), format!("parallelize: {e}")))?;
        if axis.kind == mercury_commir::AxisKind::Reduction {
            return Err(Diagnostic::error(
                floc,
                format!("parallelize: cannot distribute '@{}': it is a plain reduction axis, whose partial results are never combined across devices (declare its axis 'managed' to let the compiler combine them)", self.axis),
            ));
        }
        if axis.extent != m.mesh.shape[level] {
            return Err(Diagnostic::error(
                floc,
                format!(
                    "parallelize: the loop over '@{}' has {} iterations but mesh level {level} has {} devices (tile it by {} first)",
                    self.axis, axis.extent, m.mesh.shape[level], m.mesh.shape[level]
                ),
            ));
        }
        if let Some(l) = f.parallel() {
            return Err(Diagnostic::error(
                f.op().loc.clone(),
                format!(
                    "parallelize: the loop over '@{}' is already parallel over mesh level {l}",
                    self.axis
                ),
            ));
        }
        if f.shift().is_some() {
            return Err(Diagnostic::error(
                f.op().loc.clone(),
                format!("parallelize: the loop over '@{}' is shifted", self.axis),
            ));
        }
        // Iterations on different devices run concurrently: a dependence between two of them
        // (a store every iteration makes to one tile: the last would win) cannot be kept.
        if let Some(dep) = deps::carried_by(&deps::build(m), m, &self.axis) {
            return Err(deps::race_error("parallelize: ", &self.axis, dep));
        }
        f.set_parallel(level as i64);
        if self.shard {
            for mut op in buffers_mut(k.body_mut(0)) {
                if is_output(&op) {
                    continue;
                }
                let d = dims(&op);
                let mut p = placement(&op);
                for (di, b) in d.iter().enumerate() {
                    let DimBinding::Axes(ax) = b else { continue };
                    if !ax.contains(&self.axis) {
                        continue;
                    }
                    let used = p.levels.iter().flatten().any(|l| *l == level);
                    if !used {
                        // Keep the mesh levels of a dimension in the order of its axes.
                        let pos = ax.iter().position(|x| *x == self.axis).unwrap_or(0);
                        let insert_at = p.levels[di].len().min(pos);
                        p.levels[di].insert(insert_at, level);
                    }
                    if let Some(split) = self.placement.0 {
                        if p.levels[di].contains(&level) {
                            p.splits.insert(level, split);
                        }
                    }
                }
                set_placement(&mut op, &Placement::new(p.levels, p.splits));
            }
        }
        // The model re-checks extent == mesh size, reduction axes and reused levels.
        Ok(())
    }
}
