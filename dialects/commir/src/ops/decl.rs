//! The rules of the declaration ops: `commir.mesh`, `commir.axis`, `commir.buffer`,
//! `commir.documents`.

use super::{AxisOp, BufferOp, DocumentsOp, MeshOp};
use crate::attrs::DimBinding;
use crate::model::{Axis, Buffer, DocumentsDecl, Mesh, Role};
use crate::placement::{check_dim, Placement};
use mercury_ir::{Diagnostic, Location, Operation};
use std::collections::HashSet;
use std::ops::Deref;

fn err(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

impl<O: Deref<Target = Operation>> MeshOp<O> {
    /// Checks the mesh (positive sizes, at most 2^20 devices, one name and one positive
    /// bandwidth per level when given) and returns its model.
    pub fn verify(&self) -> Result<Mesh, Diagnostic> {
        let op = self.op();
        let name = op.symbol_name().unwrap_or_default().to_string();
        let shape: Vec<usize> = self
            .shape()
            .ok_or_else(|| err(&op.loc, "mesh needs a 'shape' array"))?
            .into_iter()
            .map(|x| usize::try_from(x).ok().filter(|v| *v > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| err(&op.loc, "mesh dimensions must be positive"))?;
        if shape.is_empty() {
            return Err(err(&op.loc, "mesh must have at least one dimension"));
        }
        if shape
            .iter()
            .try_fold(1usize, |acc, x| acc.checked_mul(*x))
            .is_none_or(|n| n > MAX_DEVICES)
        {
            return Err(err(&op.loc, "mesh has too many devices"));
        }
        let names = match self.names() {
            None => vec![],
            Some(a) => a
                .as_array()
                .and_then(|v| {
                    v.iter()
                        .map(|x| x.as_str().map(String::from))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| err(&op.loc, "mesh 'names' must be an array of strings"))?,
        };
        // A level is named where a number would do (`parallelize{level=gpu}`): a name must say
        // one level. An empty name, one that reads as a level number, or a name given twice
        // would pick a level silently (the first), so they are refused.
        for (l, n) in names.iter().enumerate() {
            let why = if n.is_empty() {
                Some("is empty".to_string())
            } else if n.bytes().all(|b| b.is_ascii_digit()) {
                Some("reads as a level number".to_string())
            } else if !n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                Some("is not a plain name (a letter or '_', then letters, digits, '_' or '-'), so a pass option cannot give it".to_string())
            } else {
                names[..l].iter().position(|m| m == n).map(|k| {
                    format!("names level {k} too (a pass option naming it would pick level {k})")
                })
            };
            if let Some(why) = why {
                return Err(err(&op.loc, format!("mesh level {l}'s name {n:?} {why}")));
            }
        }
        if !names.is_empty() && names.len() != shape.len() {
            return Err(err(
                &op.loc,
                format!(
                    "mesh has {} dimensions but {} names",
                    shape.len(),
                    names.len()
                ),
            ));
        }
        let bandwidth = match self.bandwidth() {
            None => vec![],
            Some(a) => a
                .as_array()
                .and_then(|v| v.iter().map(|x| x.as_float()).collect::<Option<Vec<_>>>())
                .ok_or_else(|| {
                    err(
                        &op.loc,
                        "mesh 'bandwidth' must be an array of numbers (GB/s)",
                    )
                })?,
        };
        if !bandwidth.is_empty()
            && (bandwidth.len() != shape.len() || bandwidth.iter().any(|b| *b <= 0.0))
        {
            return Err(err(
                &op.loc,
                "mesh 'bandwidth' needs one positive number per dimension",
            ));
        }
        Ok(Mesh {
            name,
            shape,
            names,
            bandwidth,
        })
    }
}

/// The most positions an axis may have (2^40).
pub const MAX_EXTENT: i64 = 1 << 40;

/// The most devices a mesh may have (2^20).
pub const MAX_DEVICES: usize = 1 << 20;

impl<O: Deref<Target = Operation>> DocumentsOp<O> {
    /// Checks the declaration (a positive number of positions, at most an axis's extent) and
    /// returns its model. Its name is a symbol of the kernel, so no buffer shares it (a run
    /// binds both by name).
    pub fn verify(&self) -> Result<DocumentsDecl, Diagnostic> {
        let op = self.op();
        let name = op.symbol_name().unwrap_or_default().to_string();
        let positions = self
            .read_positions()
            .map_err(|m| {
                err(
                    &op.loc,
                    format!("documents '@{name}': attribute 'positions': {m}"),
                )
            })?
            .unwrap_or(0);
        if positions <= 0 || positions > MAX_EXTENT {
            return Err(err(
                &op.loc,
                format!(
                    "documents '@{name}' must cover between 1 and 2^40 positions, not {positions}"
                ),
            ));
        }
        Ok(DocumentsDecl {
            name,
            positions: positions as usize,
            loc: op.loc.clone(),
        })
    }
}

impl<O: Deref<Target = Operation>> AxisOp<O> {
    /// Checks the axis (a positive extent of at most 2^40, a known kind, a minimum block within
    /// the extent) and returns its model.
    pub fn verify(&self) -> Result<Axis, Diagnostic> {
        let op = self.op();
        let name = op.symbol_name().unwrap_or_default().to_string();
        // A malformed value says why (a float or a string read as "got 0").
        let int = |what: &str, r: Result<Option<i64>, String>| {
            r.map_err(|m| err(&op.loc, format!("axis '@{name}': attribute '{what}': {m}")))
        };
        let extent = int("extent", self.read_extent())?.unwrap_or(0);
        if extent <= 0 {
            return Err(err(
                &op.loc,
                format!("axis '@{name}' must have a positive extent, got {extent}"),
            ));
        }
        if extent > MAX_EXTENT {
            return Err(err(
                &op.loc,
                format!("axis '@{name}' has {extent} positions, more than an axis may have (2^40 = {MAX_EXTENT})"),
            ));
        }
        let kind = self
            .read_kind()
            .map_err(|other| err(&op.loc, format!("unknown axis kind {other}")))?
            .ok_or_else(|| err(&op.loc, "unknown axis kind None"))?;
        let min_block = int("min_block", self.read_min_block())?.unwrap_or(1);
        if min_block <= 0 || min_block > extent {
            return Err(err(
                &op.loc,
                format!(
                    "axis '@{name}': min block {min_block} must be between 1 and the extent {extent}"
                ),
            ));
        }
        Ok(Axis {
            name,
            extent: extent as usize,
            kind,
            min_block: min_block as usize,
            loc: op.loc.clone(),
        })
    }
}

impl<O: Deref<Target = Operation>> BufferOp<O> {
    /// Checks the buffer against the axes declared before it and the mesh (dimensions bound
    /// to declared axes, each axis once, a float element type, a sharding that fits) and
    /// returns its model.
    pub fn verify(&self, axes: &[Axis], mesh: &Mesh) -> Result<Buffer, Diagnostic> {
        let op = self.op();
        let name = op.symbol_name().unwrap_or_default().to_string();
        let dims = self
            .read_dims()
            .map_err(|m| err(&op.loc, m))?
            .unwrap_or_default();
        if dims.is_empty() {
            return Err(err(
                &op.loc,
                format!("buffer '@{name}' needs at least one dimension"),
            ));
        }
        let mut seen = HashSet::new();
        let mut shape = Vec::new();
        for d in &dims {
            let size = match d {
                DimBinding::Fixed(n) => *n as usize,
                DimBinding::Axes(ax) => {
                    let mut s = 1usize;
                    for a in ax {
                        let axis = axes.iter().find(|x| &x.name == a).ok_or_else(|| err(&op.loc, format!("buffer '@{name}' uses '@{a}', which is not an axis declared before it in this kernel")))?;
                        if !seen.insert(a.clone()) {
                            return Err(err(
                                &op.loc,
                                format!("buffer '@{name}' binds axis '@{a}' twice"),
                            ));
                        }
                        s = s.checked_mul(axis.extent).ok_or_else(|| {
                            err(
                                &op.loc,
                                format!("buffer '@{name}' is too large: dimension {} has more than 2^64 elements", shape.len()),
                            )
                        })?;
                    }
                    s
                }
            };
            shape.push(size);
        }
        let dtype = self
            .dtype()
            .ok_or_else(|| err(&op.loc, "buffer needs an element type"))?;
        if !dtype.is_float() {
            return Err(err(
                &op.loc,
                format!("buffer '@{name}' element type must be a float type, got '{dtype}'"),
            ));
        }
        let elem = dtype.scalar_bytes().unwrap_or(4);
        let bytes = shape
            .iter()
            .try_fold(elem, |acc, d| acc.checked_mul(*d as u64));
        let elements = shape
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(*d as u64));
        if bytes.is_some() && elements.is_some_and(|n| n > mercury_plan::MAX_ELEMENTS as u64) {
            let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
            return Err(err(
                &op.loc,
                format!(
                    "buffer '@{name}' is too large: {} = {} elements, more than the {} (2^48) a plan holds",
                    dims.join(" x "),
                    elements.unwrap_or(0),
                    mercury_plan::MAX_ELEMENTS
                ),
            ));
        }
        if bytes.is_none() {
            let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
            return Err(err(
                &op.loc,
                format!(
                    "buffer '@{name}' is too large: {} elements of {elem} bytes do not fit in 64 bits",
                    dims.join(" x ")
                ),
            ));
        }
        let role: Role = self
            .read_role()
            .map_err(|other| err(&op.loc, format!("unknown buffer role {other}")))?
            .ok_or_else(|| err(&op.loc, "unknown buffer role None"))?;
        let placement = self
            .read_sharding()
            .map_err(|m| err(&op.loc, m))?
            .unwrap_or_else(|| Placement::from(vec![vec![]; dims.len()]));
        check_placement(&name, &placement, &shape, mesh).map_err(|m| err(&op.loc, m))?;
        Ok(Buffer {
            name,
            dims,
            dtype,
            role,
            sharding: placement.levels,
            splits: placement.splits,
            loc: op.loc.clone(),
        })
    }
}

/// Checks a contiguous sharding against a buffer shape and a mesh ([`check_placement`]).
pub fn check_sharding(
    name: &str,
    sharding: &[Vec<usize>],
    shape: &[usize],
    mesh: &Mesh,
) -> Result<(), String> {
    check_placement(name, &Placement::from(sharding.to_vec()), shape, mesh)
}

/// Checks a placement against a buffer shape and a mesh: one entry per dimension, existing
/// mesh levels, each level once (so one placement per level), and every dimension divisible
/// under its splits (blocks, `2m` zigzag chunks, whole rounds of striped blocks).
pub fn check_placement(
    name: &str,
    placement: &Placement,
    shape: &[usize],
    mesh: &Mesh,
) -> Result<(), String> {
    let sharding = &placement.levels;
    if sharding.len() != shape.len() {
        return Err(format!(
            "sharding of '@{name}' has {} entries but the buffer has {} dimensions",
            sharding.len(),
            shape.len()
        ));
    }
    let mut used = HashSet::new();
    for (d, levels) in sharding.iter().enumerate() {
        let mut parts = 1usize;
        for l in levels {
            if *l >= mesh.shape.len() {
                return Err(format!(
                    "sharding of '@{name}' uses mesh level {l}, which does not exist: {}",
                    mesh.levels_text()
                ));
            }
            if !used.insert(*l) {
                return Err(format!("sharding of '@{name}' uses mesh level {l} twice"));
            }
            parts = parts.saturating_mul(mesh.shape[*l]);
        }
        if placement.dim_is_contiguous(d) {
            if !shape[d].is_multiple_of(parts) {
                return Err(format!(
                    "dimension {d} of '@{name}' (size {}) does not divide into {parts} shards",
                    shape[d]
                ));
            }
        } else {
            check_dim(shape[d], &placement.dim(d), &mesh.shape)
                .map_err(|e| format!("dimension {d} of '@{name}' (size {}): {e}", shape[d]))?;
        }
    }
    Ok(())
}
