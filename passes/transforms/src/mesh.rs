//! Rewrites of the mesh a module is placed on:
//! - `single-device`: the operator on one device (a mesh of ones, every buffer replicated, no
//!   reshards): the reference `mercury-run --check` and `--bench` compare a schedule with;
//! - `reshape-mesh{shape=2x4}`: the mesh re-shaped to other levels (names and bandwidths
//!   dropped), every sharded dimension sharded over all the new levels: how the search tries
//!   every factorisation of a topology's devices.

use crate::util::is_reshard;
use mercury_commir::ops::{BufferOp, KernelOp, MeshOp, ReshardOp};
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
/// dropped) and every placement (declared on a buffer, or the target of a `commir.reshard`)
/// re-expressed on it: the one sharded dimension sharded over all the new levels, with the
/// same flat split (contiguous, zigzag, or striped with the same flat block).
///
/// # Errors
/// A placement that this would change rather than re-express, at its op: see
/// [`reexpress`]. The module is left unchanged then.
pub fn reshape_mesh(module: &mut Operation, shape: &[usize]) -> Result<(), Diagnostic> {
    let meshes: BTreeMap<String, Vec<usize>> = module
        .body(0)
        .iter()
        .filter_map(MeshOp::cast)
        .filter_map(|m| {
            let shape = m.shape()?.iter().map(|s| *s as usize).collect();
            Some((m.sym_name()?, shape))
        })
        .collect();
    let mut out = module.clone();
    let mut failure: Option<Diagnostic> = None;
    for op in out.body_mut(0).iter_mut() {
        if let Some(mut mesh) = MeshOp::cast(&mut *op) {
            mesh.set_shape(shape.iter().map(|s| *s as i64).collect::<Vec<_>>());
            mesh.remove_names();
            mesh.remove_bandwidth();
            continue;
        }
        let Some(old) = KernelOp::cast(&*op)
            .and_then(|k| k.mesh())
            .and_then(|m| meshes.get(&m).cloned())
        else {
            continue;
        };
        op.walk_mut(&mut |inner| {
            if failure.is_some() {
                return;
            }
            let loc = inner.loc.clone();
            let rewritten = if let Some(mut b) = BufferOp::cast(&mut *inner) {
                let name = b.sym_name().unwrap_or_default();
                b.sharding().map(|p| {
                    reexpress(&p, &old, shape)
                        .map(|n| b.set_sharding(n))
                        .map_err(|why| (name, p, why))
                })
            } else if let Some(mut r) = ReshardOp::cast(&mut *inner) {
                let name = r.buffer().unwrap_or_default();
                r.sharding().map(|p| {
                    reexpress(&p, &old, shape)
                        .map(|n| r.set_sharding(n))
                        .map_err(|why| (name, p, why))
                })
            } else {
                None
            };
            if let Some(Err((name, p, why))) = rewritten {
                failure = Some(Diagnostic::error(
                    loc,
                    format!(
                        "reshape-mesh cannot re-express '@{name}' {} on mesh {shape:?}: {why}; keep the mesh {old:?}",
                        crate::util::describe(&p)
                    ),
                ));
            }
        });
    }
    if let Some(d) = failure {
        return Err(d);
    }
    *module = out;
    Ok(())
}

/// `p` (a placement on a mesh of shape `old`) re-expressed on a mesh of shape `new`, as the
/// same flat placement: levels of size 1 shard nothing, at most one dimension is sharded and
/// it is sharded over every level larger than 1, slowest first (so flat rank = row-major
/// rank), with one flat split (every level block, every level zigzag, or the striping
/// [`flatten_splits`] writes for one flat block). The result shards that dimension over all
/// the new levels with the same flat split.
///
/// # Errors
/// Why `p` is not such a flat placement (partly replicated, two dimensions, levels out of
/// order, splits that do not flatten into one).
pub fn reexpress(p: &Placement, old: &[usize], new: &[usize]) -> Result<Placement, String> {
    let big: Vec<usize> = (0..old.len()).filter(|l| old[*l] > 1).collect();
    let effective: Vec<Vec<usize>> = p
        .levels
        .iter()
        .map(|ls| ls.iter().copied().filter(|l| old[*l] > 1).collect())
        .collect();
    let sharded: Vec<usize> = (0..effective.len())
        .filter(|d| !effective[*d].is_empty())
        .collect();
    let Some(&d) = sharded.first() else {
        // Replicated (or sharded over levels of size 1 only).
        return Ok(Placement::new(
            vec![vec![]; p.levels.len()],
            BTreeMap::new(),
        ));
    };
    if sharded.len() > 1 {
        return Err(format!(
            "it shards {} dimensions, and re-shaped each would be sharded over all the new levels",
            sharded.len()
        ));
    }
    let levels = &effective[d];
    if *levels != big {
        let missing: Vec<usize> = big
            .iter()
            .copied()
            .filter(|l| !levels.contains(l))
            .collect();
        return Err(if missing.is_empty() {
            format!(
                "its levels {levels:?} are not in mesh order, so its blocks are not in rank order"
            )
        } else {
            format!("it is replicated over level(s) {missing:?} and would become sharded over every device")
        });
    }
    let kinds: Vec<Split> = levels.iter().map(|l| p.split(*l)).collect();
    let flat = match kinds.last() {
        Some(Split::Striped(b)) => Split::Striped(*b),
        Some(s) => *s,
        None => Split::Block,
    };
    let expected: Vec<Split> = flatten_splits(flat, levels, old)
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    if kinds != expected {
        return Err(format!(
            "its splits {kinds:?} over levels {levels:?} are not one split of the flattened levels"
        ));
    }
    let all: Vec<usize> = (0..new.len()).collect();
    let mut out = vec![vec![]; p.levels.len()];
    out[d] = all.clone();
    Ok(Placement::new(
        out,
        flatten_splits(flat, &all, new).into_iter().collect(),
    ))
}

pub static SINGLE_DEVICE: PassInfo = PassInfo {
    name: "single-device",
    summary: "Place the operator on one device (mesh of ones, replicated buffers, no reshards)",
    options: &[],
    target: None,
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
    target: None,
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
