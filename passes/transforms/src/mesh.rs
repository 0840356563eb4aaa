//! Rewrites of the mesh a module is placed on:
//! - `single-device`: the operator on one device (a mesh of ones, every buffer replicated, no
//!   reshards): the reference `mercury-run --check` and `--bench` compare a schedule with;
//! - `reshape-mesh{shape=2x4}`: the mesh re-shaped to other levels (names and bandwidths
//!   dropped), every sharded dimension sharded over all the new levels: how the search tries
//!   every factorisation of a topology's devices.

use crate::util::is_reshard;
use mercury_commir::ops::{BufferOp, MeshOp};
use mercury_commir::placement::flatten_splits;
use mercury_commir::{Placement, Split};
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};
use std::collections::BTreeMap;

/// The operator of `module` on one device: every mesh level of size 1, every buffer
/// replicated, every `commir.reshard` removed.
pub fn single_device(module: &mut Operation) {
    module.walk_mut(&mut |op| {
        if let Some(mut mesh) = MeshOp::cast(&mut *op) {
            let n = mesh.shape().map_or(1, |v| v.len());
            mesh.set_shape(vec![1; n]);
        } else if let Some(mut buffer) = BufferOp::cast(&mut *op) {
            buffer.remove_sharding();
        }
    });
    module.walk_mut(&mut |op| {
        for r in &mut op.regions {
            for b in &mut r.blocks {
                b.ops.retain(|o| !is_reshard(o));
            }
        }
    });
}

/// `module` with every mesh re-shaped to `shape` (slowest level first; names and bandwidths
/// dropped) and every sharded buffer dimension sharded over all of its levels (a dimension
/// zigzag or striped on every old level keeps that split over the flattened new levels).
///
/// # Errors
/// A buffer whose placement that rewrite would change rather than re-express, at its
/// declaration: one sharded over some mesh levels and replicated over others (it would become
/// fully sharded), or one sharding two dimensions (both would use every new level). The
/// module is left unchanged then.
pub fn reshape_mesh(module: &mut Operation, shape: &[usize]) -> Result<(), Diagnostic> {
    if let Ok(kernels) = mercury_commir::kernels(module) {
        for k in &kernels {
            check_reexpressible(k, shape)?;
        }
    }
    let levels: Vec<usize> = (0..shape.len()).collect();
    module.walk_mut(&mut |op| {
        if let Some(mut mesh) = MeshOp::cast(&mut *op) {
            mesh.set_shape(shape.iter().map(|s| *s as i64).collect::<Vec<_>>());
            mesh.remove_names();
            mesh.remove_bandwidth();
        } else if let Some(mut buffer) = BufferOp::cast(&mut *op) {
            if let Some(p) = buffer.sharding() {
                let mut splits = BTreeMap::new();
                let mut new = Vec::new();
                for d in 0..p.levels.len() {
                    if p.levels[d].is_empty() {
                        new.push(vec![]);
                        continue;
                    }
                    // A dimension zigzag or striped on every level keeps the same flat split
                    // over the new levels.
                    let kinds: Vec<Split> = p.dim(d).into_iter().map(|(_, s)| s).collect();
                    let flat = match kinds.as_slice() {
                        [.., Split::Striped(b)]
                            if kinds.iter().all(|s| matches!(s, Split::Striped(_))) =>
                        {
                            Split::Striped(*b)
                        }
                        _ if kinds.iter().all(|s| *s == Split::Zigzag) => Split::Zigzag,
                        _ => Split::Block,
                    };
                    splits.extend(flatten_splits(flat, &levels, shape));
                    new.push(levels.clone());
                }
                buffer.set_sharding(Placement::new(new, splits));
            }
        }
    });
    Ok(())
}

/// Whether `reshape_mesh` can re-express every placement of `k` on a mesh of `shape`: each
/// sharded buffer shards one dimension, over every level of its mesh larger than 1.
fn check_reexpressible(k: &mercury_commir::Kernel, shape: &[usize]) -> Result<(), Diagnostic> {
    let mesh = &k.mesh.shape;
    for b in &k.buffers {
        let sharded: Vec<usize> = (0..b.sharding.len())
            .filter(|d| !b.sharding[*d].is_empty())
            .collect();
        let placement = crate::util::describe(&b.placement());
        if sharded.len() > 1 {
            return Err(Diagnostic::error(
                b.loc.clone(),
                format!(
                    "reshape-mesh cannot re-express '@{}' {placement} on mesh {shape:?}: it shards {} dimensions, and every sharded dimension would be sharded over all the new levels; keep the mesh {mesh:?}",
                    b.name,
                    sharded.len()
                ),
            ));
        }
        let Some(d) = sharded.first() else {
            continue;
        };
        let replicated: Vec<usize> = (0..mesh.len())
            .filter(|l| mesh[*l] > 1 && !b.sharding[*d].contains(l))
            .collect();
        if !replicated.is_empty() {
            return Err(Diagnostic::error(
                b.loc.clone(),
                format!(
                    "reshape-mesh cannot re-express '@{}' {placement} on mesh {shape:?}: it is replicated over level(s) {replicated:?} of mesh {mesh:?} and would become sharded over every device; declare it sharded over every level, or keep the mesh",
                    b.name
                ),
            ));
        }
    }
    Ok(())
}

pub static SINGLE_DEVICE: PassInfo = PassInfo {
    name: "single-device",
    summary: "Place the operator on one device (mesh of ones, replicated buffers, no reshards)",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(SingleDevice)),
};

pub struct SingleDevice;

impl Pass for SingleDevice {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        single_device(module);
        Ok(())
    }
}

pub static RESHAPE_MESH: PassInfo = PassInfo {
    name: "reshape-mesh",
    summary: "Re-shape the mesh (sharded dimensions become sharded over every new level)",
    options: &[PassOptionDef {
        name: "shape",
        help: "devices per level, slowest first, e.g. 2x4",
        default: None,
    }],
    create: |o: &PassOptions| {
        let shape = o
            .get("shape")
            .split('x')
            .map(|s| s.trim().parse::<usize>().ok().filter(|n| *n > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                format!(
                    "option 'shape' must be positive sizes joined by 'x', got '{}'",
                    o.get("shape")
                )
            })?;
        Ok(Box::new(ReshapeMesh { shape }))
    },
};

pub struct ReshapeMesh {
    pub shape: Vec<usize>,
}

impl Pass for ReshapeMesh {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        reshape_mesh(module, &self.shape)
    }
}
