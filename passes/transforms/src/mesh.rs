//! Rewrites of the mesh a module is placed on:
//! - `single-device`: the operator on one device (a mesh of ones, every buffer replicated, no
//!   reshards): the reference `mercury-run --check` and `--bench` compare a schedule with;
//! - `reshape-mesh{shape=2x4 on=k}`: a kernel's mesh re-shaped to other levels (names and
//!   bandwidths dropped), every sharded dimension sharded over all the new levels: how the
//!   search tries every factorisation of a topology's devices.

use crate::util::is_reshard;
use mercury_commir::ops::{BufferOp, ForOp, KernelOp, MeshOp, ReshardOp};
use mercury_commir::placement::flatten_splits;
use mercury_commir::{Placement, Split, MAX_DEVICES};
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};
use std::collections::BTreeMap;

/// The operator of `module` on one device: every mesh level of size 1, every buffer
/// replicated, every `commir.reshard` removed, no loop parallel or shifted.
pub fn single_device(module: &mut Operation) {
    module.walk_mut(&mut |op| {
        if let Some(mut mesh) = MeshOp::cast(&mut *op) {
            let n = mesh.shape().map_or(1, |v| v.len());
            mesh.set_shape(vec![1; n]);
        } else if let Some(mut buffer) = BufferOp::cast(&mut *op) {
            buffer.remove_sharding();
        } else if let Some(mut l) = ForOp::cast(&mut *op) {
            // One device runs every iteration in turn: no loop is parallel or shifted (a
            // shifted loop's indices stay permuted: the same result in another order).
            l.remove_parallel();
            l.remove_shift();
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

/// `module` with the mesh of kernel `on` (every kernel's mesh when `on` is empty and the
/// kernels share one mesh) re-shaped to `shape` (slowest level first; names and bandwidths
/// dropped), and every placement of the kernels on it (declared on a buffer, or the target of
/// a `commir.reshard`) re-expressed on it: the one sharded dimension sharded over all the new
/// levels, with the same flat split (contiguous, zigzag, or striped with the same flat block).
/// The device count may change (an 8-rank operator on a 16-device topology). When kernel `on`
/// shares its mesh with other kernels, it gets a re-shaped copy of the mesh (named
/// `@<mesh>_<shape>`, e.g. `@mesh_2x4`) and the others keep theirs. Kernels on other meshes are
/// never touched.
///
/// # Errors
/// - no kernel named `on`;
/// - `on` empty while the kernels are on several meshes (which one is meant?), at the first
///   kernel on a second mesh;
/// - a placement that this would change rather than re-express, at its op: see
///   [`reexpress`].
///
/// The module is left unchanged then.
pub fn reshape_mesh(module: &mut Operation, shape: &[usize], on: &str) -> Result<(), Diagnostic> {
    let meshes: BTreeMap<String, Vec<usize>> = module
        .body(0)
        .iter()
        .filter_map(MeshOp::cast)
        .filter_map(|m| {
            let shape = m.shape()?.iter().map(|s| *s as usize).collect();
            Some((m.sym_name()?, shape))
        })
        .collect();
    // (kernel, its mesh, its location), in module order.
    let kernels: Vec<(String, String, mercury_ir::Location)> = module
        .body(0)
        .iter()
        .filter_map(|op| {
            let k = KernelOp::cast(op)?;
            Some((k.sym_name()?, k.mesh()?, op.loc.clone()))
        })
        .collect();
    let shown = shape
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join("x");
    let on = on.trim_start_matches('@');
    // The mesh to re-shape, and the kernel that gets a copy of it of its own (if any).
    let (mesh, copy_for): (Option<String>, Option<String>) = if on.is_empty() {
        let mut used: Vec<&str> = Vec::new();
        for (name, m, loc) in &kernels {
            if !used.contains(&m.as_str()) {
                used.push(m);
            }
            if used.len() > 1 {
                return Err(Diagnostic::error(
                    loc.clone(),
                    format!(
                        "reshape-mesh{{shape={shown}}}: the module's kernels are on several meshes (@{} and @{m}, of '@{name}'); name the kernel whose mesh to re-shape with 'on=' (mercury-opt --kernel)",
                        used[0]
                    ),
                ));
            }
        }
        (used.first().map(|m| m.to_string()), None)
    } else {
        let Some((_, m, _)) = kernels.iter().find(|(k, _, _)| k == on) else {
            return Err(Diagnostic::error(
                module.loc.clone(),
                format!("reshape-mesh{{shape={shown}}}: no commir.kernel named '@{on}'"),
            ));
        };
        let shared = kernels.iter().any(|(k, m2, _)| k != on && m2 == m);
        (Some(m.clone()), shared.then(|| on.to_string()))
    };
    let mut out = module.clone();
    // A kernel sharing its mesh with others gets a re-shaped copy, right after the original.
    let target = match (&mesh, &copy_for) {
        (Some(m), Some(k)) => {
            let mut name = format!("{m}_{shown}");
            let mut n = 1;
            while meshes.contains_key(&name) {
                n += 1;
                name = format!("{m}_{shown}_{n}");
            }
            let body = out.body_mut(0);
            let at = body
                .iter()
                .position(|op| MeshOp::cast(op).and_then(|o| o.sym_name()).as_ref() == Some(m))
                .expect("the kernel's mesh is declared");
            let mut copy = body[at].clone();
            MeshOp::cast(&mut copy)
                .expect("a mesh")
                .set_sym_name(name.clone());
            body.insert(at + 1, copy);
            for op in body.iter_mut() {
                if let Some(mut kop) = KernelOp::cast(&mut *op) {
                    if kop.sym_name().as_deref() == Some(k.as_str()) {
                        kop.set_mesh(name.clone());
                    }
                }
            }
            Some(name)
        }
        (m, _) => m.clone(),
    };
    let old = mesh.as_ref().and_then(|m| meshes.get(m).cloned());
    let mut failure: Option<Diagnostic> = None;
    for op in out.body_mut(0).iter_mut() {
        if let Some(mut m) = MeshOp::cast(&mut *op) {
            if target.is_none() || m.sym_name() == target {
                m.set_shape(shape.iter().map(|s| *s as i64).collect::<Vec<_>>());
                m.remove_names();
                m.remove_bandwidth();
            }
            continue;
        }
        let Some(old) = KernelOp::cast(&*op)
            .and_then(|k| k.mesh())
            .filter(|m| Some(m) == target.as_ref())
            .and(old.clone())
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
    // The re-expressed kernels must hold on the new mesh (every sharded dimension divides into
    // its shards): refused here, at the op, rather than left for the verifier after the pass.
    if let Err(d) = mercury_commir::kernels(&out) {
        return Err(Diagnostic::error(
            d.loc,
            format!(
                "reshape-mesh{{shape={shown}}} cannot place the operator on mesh {shape:?}: {}; keep the mesh{}, or give a shape whose devices divide it",
                d.message,
                old.map(|o| format!(" {o:?}")).unwrap_or_default()
            ),
        ));
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
    options: &[
        PassOptionDef {
            name: "shape",
            help: "devices per level, slowest first, e.g. 2x4",
            default: None,
        },
        PassOptionDef {
            name: "on",
            help: "the commir.kernel whose mesh to re-shape (a kernel sharing its mesh with others gets a copy of its own); default: the one mesh every kernel is on",
            default: Some(""),
        },
    ],
    target: Some("on"),
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
        // The verifier's limit on a mesh (`commir.mesh`), said here about the option.
        if shape
            .iter()
            .try_fold(1usize, |acc, x| acc.checked_mul(*x))
            .is_none_or(|n| n > MAX_DEVICES)
        {
            return Err(format!(
                "option 'shape' = '{}' has more than {MAX_DEVICES} devices",
                o.get("shape")
            ));
        }
        Ok(Box::new(ReshapeMesh {
            shape,
            on: o.get("on").to_string(),
        }))
    },
};

/// `reshape-mesh{shape=2x4 on=k}`: [`reshape_mesh`].
pub struct ReshapeMesh {
    /// Devices per level, slowest first.
    pub shape: Vec<usize>,
    /// The kernel whose mesh to re-shape; empty: the one mesh every kernel is on.
    pub on: String,
}

impl Pass for ReshapeMesh {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        reshape_mesh(module, &self.shape, &self.on)
    }
}
