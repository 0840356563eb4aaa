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
pub fn reshape_mesh(module: &mut Operation, shape: &[usize]) {
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
        reshape_mesh(module, &self.shape);
        Ok(())
    }
}
