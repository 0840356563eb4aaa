//! `reshard-edges`: joins a kernel to the kernels before it in its module. An input of the
//! kernel that an earlier kernel writes (an `out` or `inout` buffer of the same name: the
//! latest such kernel in module order) is an *edge*: the value arrives where that kernel leaves
//! it. Where the two placements differ, the input is re-declared in the producer's placement
//! and a `commir.reshard` at the start of the kernel moves it to the placement the kernel reads
//! it in, lowered as every reshard is (an all-gather, a local slice, an all-to-all, or
//! point-to-point transfers of exactly the runs that change rank: `reshard`). Placements that
//! agree move nothing. An edge whose shape or element type differs between its two ends, or
//! whose kernels are on different meshes, is refused at the reader's declaration with a note
//! at the writer's. Buffers no earlier kernel writes (the module's inputs, its weights) are
//! not edges. Run it after the kernel's schedule (a schedule may re-declare an input, and the
//! edge reshards to that); running it again changes nothing.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::{Buffer, Kernel, Placement, Role};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `reshard-edges` (none but the kernel).
    pub struct ReshardEdges = "reshard-edges", "Reshard the inputs a kernel reads in another placement than the earlier kernel that writes them leaves them", {}
}

/// The latest kernel of `before` that writes `name`, and its declaration there.
fn producer<'a>(before: &'a [Kernel], name: &str) -> Option<(&'a Kernel, &'a Buffer)> {
    before.iter().rev().find_map(|k| {
        k.buffer(name)
            .filter(|b| matches!(b.role, Role::Out | Role::InOut))
            .map(|b| (k, b))
    })
}

impl KernelPass for ReshardEdges {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let kernels = mercury_commir::kernels(module)?;
        let at = kernels.iter().position(|k| k.name == m.name).unwrap_or(0);
        let before = &kernels[..at];
        // (buffer, the producer's placement, the placement this kernel reads it in)
        let mut edges: Vec<(String, Placement, Placement)> = Vec::new();
        for b in m
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::InOut))
        {
            let Some((pk, pb)) = producer(before, &b.name) else {
                continue;
            };
            let refuse = |why: String| {
                Diagnostic::error(b.loc.clone(), format!("reshard-edges: {why}")).with_note(
                    pb.loc.clone(),
                    format!("'@{}' as the kernel '@{}' writes it", pb.name, pk.name),
                )
            };
            if pk.mesh.shape != m.mesh.shape {
                return Err(refuse(format!(
                    "'@{}' comes from the kernel '@{}' on a mesh of shape {:?}, and '@{}' runs on {:?}: an edge joins kernels of one mesh",
                    b.name, pk.name, pk.mesh.shape, m.name, m.mesh.shape
                )));
            }
            let (ps, s) = (pk.shape(pb), m.shape(b));
            if ps != s || pb.dtype != b.dtype {
                return Err(refuse(format!(
                    "'@{}' is {s:?} {} here and {ps:?} {} where the kernel '@{}' writes it",
                    b.name, b.dtype, pb.dtype, pk.name
                )));
            }
            let (from, to) = (pb.placement(), b.placement());
            if from != to {
                mercury_commir::model::check_placement(&b.name, &from, &s, &m.mesh)
                    .map_err(|e| refuse(e.to_string()))?;
                edges.push((b.name.clone(), from, to));
            }
        }
        if edges.is_empty() {
            return Ok(());
        }
        let k = kernel_mut(module, &m.name);
        let loc = k.loc.clone();
        let first = first_stmt(k);
        for (n, (name, from, to)) in edges.iter().enumerate() {
            let op = buffer_op_mut(k, name).expect("the model's buffer has its op");
            let mut view = BufferOp::cast(op).expect("a buffer op");
            set_placement(&mut view, from);
            // Before the reshards a schedule put there: those start from the placement this
            // kernel declares, which the edge restores.
            k.body_mut(0).insert(first + n, new_reshard(name, to, &loc));
        }
        Ok(())
    }
}
