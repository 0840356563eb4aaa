//! A typed view of a `commir.kernel`: mesh, axes, buffers and the loop tree. Building it
//! checks the kernel's semantic rules (the dialect verifier calls it), and analyses, passes and
//! lowering read kernels through it.

use crate::attrs::{dims_from_attr, indices_from_attr, sharding_from_attr, DimBinding};
use crate::expr::IndexExpr;
use mercury_ir::{AttrDict, Diagnostic, Location, Operation, Type, ValueId};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    pub name: String,
    /// Devices per level, slowest level first.
    pub shape: Vec<usize>,
    pub names: Vec<String>,
    /// Link bandwidth per level in GB/s per direction, if given.
    pub bandwidth: Vec<f64>,
}

impl Mesh {
    pub fn num_devices(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn level_name(&self, l: usize) -> String {
        self.names
            .get(l)
            .cloned()
            .unwrap_or_else(|| format!("level {l}"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisKind {
    /// Independent iterations.
    Spatial,
    /// A reduction that must stay local (inside one patch).
    Reduction,
    /// A reduction whose cross-device combine the compiler generates (add, lse merge).
    Managed,
}

impl AxisKind {
    pub fn keyword(self) -> &'static str {
        match self {
            AxisKind::Spatial => "spatial",
            AxisKind::Reduction => "reduction",
            AxisKind::Managed => "managed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub extent: usize,
    pub kind: AxisKind,
    pub min_block: usize,
    pub loc: Location,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    In,
    Out,
    InOut,
    Temp,
}

impl Role {
    pub fn is_read(self) -> bool {
        matches!(self, Role::In | Role::InOut | Role::Temp)
    }
    pub fn is_written(self) -> bool {
        matches!(self, Role::Out | Role::InOut | Role::Temp)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dims: Vec<DimBinding>,
    pub dtype: Type,
    pub role: Role,
    /// Per dimension, the mesh dimensions it is split over (empty = replicated).
    pub sharding: Vec<Vec<usize>>,
    pub loc: Location,
}

impl Buffer {
    /// (dimension, axis) for every axis the buffer is bound to, in index-list order.
    pub fn axis_slots(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (d, b) in self.dims.iter().enumerate() {
            if let DimBinding::Axes(a) = b {
                out.extend(a.iter().map(|x| (d, x.clone())));
            }
        }
        out
    }
    pub fn uses_axis(&self, axis: &str) -> bool {
        self.dims
            .iter()
            .any(|d| matches!(d, DimBinding::Axes(a) if a.iter().any(|x| x == axis)))
    }
    /// The dimension bound to `axis`, if any.
    pub fn dim_of_axis(&self, axis: &str) -> Option<usize> {
        self.dims
            .iter()
            .position(|d| matches!(d, DimBinding::Axes(a) if a.iter().any(|x| x == axis)))
    }
    pub fn is_sharded(&self) -> bool {
        self.sharding.iter().any(|s| !s.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub buffer: String,
    pub indices: Vec<IndexExpr>,
    pub loc: Location,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    Add,
    LseMerge,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    For(ForLoop),
    Load {
        result: ValueId,
        access: Access,
    },
    Patch {
        kernel: String,
        inputs: Vec<ValueId>,
        outputs: Vec<ValueId>,
        attrs: AttrDict,
        loc: Location,
    },
    Reduce {
        kind: ReduceKind,
        values: Vec<ValueId>,
        access: Access,
    },
    Store {
        value: ValueId,
        access: Access,
    },
    Reshard {
        buffer: String,
        sharding: Vec<Vec<usize>>,
        loc: Location,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ForLoop {
    pub axis: String,
    pub parallel: Option<usize>,
    pub shift: Option<String>,
    pub body: Vec<Stmt>,
    pub loc: Location,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub mesh: Mesh,
    pub axes: Vec<Axis>,
    pub buffers: Vec<Buffer>,
    pub body: Vec<Stmt>,
    pub loc: Location,
}

impl Kernel {
    pub fn axis(&self, name: &str) -> Option<&Axis> {
        self.axes.iter().find(|a| a.name == name)
    }
    pub fn buffer(&self, name: &str) -> Option<&Buffer> {
        self.buffers.iter().find(|b| b.name == name)
    }
    pub fn extent(&self, axis: &str) -> usize {
        self.axis(axis).map_or(1, |a| a.extent)
    }
    pub fn dim_size(&self, d: &DimBinding) -> usize {
        dim_size(&self.axes, d)
    }
    /// Full shape of a buffer.
    pub fn shape(&self, b: &Buffer) -> Vec<usize> {
        b.dims.iter().map(|d| self.dim_size(d)).collect()
    }
    /// Visits every statement, pre-order, with the stack of enclosing loops.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Stmt, &[&'a ForLoop])) {
        fn go<'a>(
            body: &'a [Stmt],
            stack: &mut Vec<&'a ForLoop>,
            f: &mut dyn FnMut(&'a Stmt, &[&'a ForLoop]),
        ) {
            for s in body {
                f(s, stack);
                if let Stmt::For(l) = s {
                    stack.push(l);
                    go(&l.body, stack, f);
                    stack.pop();
                }
            }
        }
        go(&self.body, &mut Vec::new(), f);
    }
    /// All loops, pre-order.
    pub fn loops(&self) -> Vec<&ForLoop> {
        let mut out = Vec::new();
        self.walk(&mut |s, _| {
            if let Stmt::For(l) = s {
                out.push(l);
            }
        });
        out
    }
    /// Loop over `axis`, if any.
    pub fn find_loop(&self, axis: &str) -> Option<&ForLoop> {
        self.loops().into_iter().find(|l| l.axis == axis)
    }
    /// Bytes of one element of a buffer.
    pub fn elem_bytes(b: &Buffer) -> usize {
        b.dtype.scalar_bytes().unwrap_or(4) as usize
    }
}

fn err(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

/// Parses a `commir.mesh` op.
pub fn mesh_from_op(op: &Operation) -> Result<Mesh, Diagnostic> {
    let name = op.symbol_name().unwrap_or_default().to_string();
    let shape: Vec<usize> = op
        .attr("shape")
        .and_then(|a| a.as_int_array())
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
        .is_none_or(|n| n > 1 << 20)
    {
        return Err(err(&op.loc, "mesh has too many devices"));
    }
    let names = match op.attr("names") {
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
    let bandwidth = match op.attr("bandwidth") {
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

struct Builder<'a> {
    axes: &'a [Axis],
    buffers: &'a [Buffer],
    mesh: &'a Mesh,
    /// Types of values defined so far (loads and patch results).
    values: HashMap<ValueId, Type>,
}

impl Kernel {
    /// Builds and checks the model of `kernel` (a `commir.kernel` op) inside `module`.
    pub fn from_op(module: &Operation, kernel: &Operation) -> Result<Kernel, Diagnostic> {
        let name = kernel.symbol_name().unwrap_or_default().to_string();
        let mesh_name = kernel
            .attr("mesh")
            .and_then(|a| a.as_symbol())
            .ok_or_else(|| err(&kernel.loc, "kernel needs a mesh symbol"))?;
        let mesh_op = module
            .body(0)
            .iter()
            .find(|o| o.name == "commir.mesh" && o.symbol_name() == Some(mesh_name))
            .ok_or_else(|| {
                err(
                    &kernel.loc,
                    format!("'@{mesh_name}' does not name a commir.mesh in the module"),
                )
            })?;
        let mesh = mesh_from_op(mesh_op)?;
        let mut axes: Vec<Axis> = Vec::new();
        let mut buffers: Vec<Buffer> = Vec::new();
        for op in kernel.body(0) {
            match op.name.as_str() {
                "commir.axis" => axes.push(axis_from_op(op)?),
                "commir.buffer" => buffers.push(buffer_from_op(op, &axes, &mesh)?),
                _ => {}
            }
        }
        let mut b = Builder {
            axes: &axes,
            buffers: &buffers,
            mesh: &mesh,
            values: HashMap::new(),
        };
        let mut stack = Vec::new();
        let body = b.stmts(kernel.body(0), &mut stack)?;
        Ok(Kernel {
            name,
            mesh,
            axes,
            buffers,
            body,
            loc: kernel.loc.clone(),
        })
    }
}

fn axis_from_op(op: &Operation) -> Result<Axis, Diagnostic> {
    let name = op.symbol_name().unwrap_or_default().to_string();
    let extent = op.attr("extent").and_then(|a| a.as_int()).unwrap_or(0);
    if extent <= 0 || extent > 1 << 40 {
        return Err(err(
            &op.loc,
            format!("axis '@{name}' must have a positive extent, got {extent}"),
        ));
    }
    let kind = match op.attr("kind").and_then(|a| a.as_str()) {
        Some("spatial") => AxisKind::Spatial,
        Some("reduction") => AxisKind::Reduction,
        Some("managed") => AxisKind::Managed,
        other => return Err(err(&op.loc, format!("unknown axis kind {other:?}"))),
    };
    let min_block = op.attr("min_block").and_then(|a| a.as_int()).unwrap_or(1);
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

fn buffer_from_op(op: &Operation, axes: &[Axis], mesh: &Mesh) -> Result<Buffer, Diagnostic> {
    let name = op.symbol_name().unwrap_or_default().to_string();
    let dims = dims_from_attr(
        op.attr("dims")
            .unwrap_or(&mercury_ir::Attribute::Array(vec![])),
    )
    .map_err(|m| err(&op.loc, m))?;
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
                    s = s
                        .checked_mul(axis.extent)
                        .ok_or_else(|| err(&op.loc, "buffer too large"))?;
                }
                s
            }
        };
        shape.push(size);
    }
    let dtype = op
        .attr("dtype")
        .and_then(|a| a.as_type())
        .cloned()
        .ok_or_else(|| err(&op.loc, "buffer needs an element type"))?;
    if !dtype.is_float() {
        return Err(err(
            &op.loc,
            format!("buffer '@{name}' element type must be a float type, got '{dtype}'"),
        ));
    }
    let role = match op.attr("role").and_then(|a| a.as_str()) {
        Some("in") => Role::In,
        Some("out") => Role::Out,
        Some("inout") => Role::InOut,
        Some("temp") => Role::Temp,
        other => return Err(err(&op.loc, format!("unknown buffer role {other:?}"))),
    };
    let sharding = match op.attr("sharding") {
        None => vec![vec![]; dims.len()],
        Some(a) => sharding_from_attr(a).map_err(|m| err(&op.loc, m))?,
    };
    check_sharding(&name, &sharding, &shape, mesh).map_err(|m| err(&op.loc, m))?;
    Ok(Buffer {
        name,
        dims,
        dtype,
        role,
        sharding,
        loc: op.loc.clone(),
    })
}

/// Checks a sharding against a buffer shape and a mesh.
pub fn check_sharding(
    name: &str,
    sharding: &[Vec<usize>],
    shape: &[usize],
    mesh: &Mesh,
) -> Result<(), String> {
    if sharding.len() != shape.len() {
        return Err(format!(
            "sharding of '@{name}' has {} entries but the buffer has {} dimensions",
            sharding.len(),
            shape.len()
        ));
    }
    let mut used = HashSet::new();
    for (d, levels) in sharding.iter().enumerate() {
        let mut parts = 1;
        for l in levels {
            if *l >= mesh.shape.len() {
                return Err(format!("sharding of '@{name}' uses mesh dimension {l}, but mesh '@{}' has {} dimensions", mesh.name, mesh.shape.len()));
            }
            if !used.insert(*l) {
                return Err(format!(
                    "sharding of '@{name}' uses mesh dimension {l} twice"
                ));
            }
            parts *= mesh.shape[*l];
        }
        if !shape[d].is_multiple_of(parts) {
            return Err(format!(
                "dimension {d} of '@{name}' (size {}) does not divide into {parts} shards",
                shape[d]
            ));
        }
    }
    Ok(())
}

fn tile_elem(t: &Type) -> Option<&str> {
    match t {
        Type::Dialect {
            dialect,
            name,
            body: Some(b),
        } if dialect == "commir" && name == "tile" => Some(b),
        _ => None,
    }
}

/// Size of a buffer dimension under `axes`.
fn dim_size(axes: &[Axis], d: &DimBinding) -> usize {
    match d {
        DimBinding::Fixed(n) => *n as usize,
        DimBinding::Axes(a) => a
            .iter()
            .map(|x| axes.iter().find(|y| &y.name == x).map_or(1, |y| y.extent))
            .product(),
    }
}

impl Builder<'_> {
    /// The buffer an access or reshard op names.
    fn buffer_of(&self, op: &Operation) -> Result<&Buffer, Diagnostic> {
        let name = op
            .attr("buffer")
            .and_then(|a| a.as_symbol())
            .unwrap_or_default();
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| err(&op.loc, format!("'@{name}' is not a buffer of this kernel")))
    }

    fn access(
        &self,
        op: &Operation,
        stack: &[(String, Option<usize>)],
        reading: bool,
    ) -> Result<Access, Diagnostic> {
        let buf = self.buffer_of(op)?;
        let bname = buf.name.clone();
        if reading && buf.role == Role::Out {
            return Err(err(
                &op.loc,
                format!("cannot load from '@{bname}', an 'out' buffer"),
            ));
        }
        if !reading && buf.role == Role::In {
            return Err(err(
                &op.loc,
                format!("cannot write to '@{bname}', an 'in' buffer"),
            ));
        }
        let indices = indices_from_attr(
            op.attr("indices")
                .unwrap_or(&mercury_ir::Attribute::Array(vec![])),
        )
        .map_err(|m| err(&op.loc, m))?;
        let slots = buf.axis_slots();
        if indices.len() != slots.len() {
            return Err(err(
                &op.loc,
                format!(
                    "'@{bname}' is indexed by {} axes but {} indices were given",
                    slots.len(),
                    indices.len()
                ),
            ));
        }
        let looped: Vec<&str> = stack.iter().map(|(a, _)| a.as_str()).collect();
        for ((_, slot_axis), e) in slots.iter().zip(&indices) {
            for a in e.axes() {
                if self.axes.iter().all(|x| x.name != a) {
                    return Err(err(
                        &op.loc,
                        format!("index uses '@{a}', which is not an axis"),
                    ));
                }
            }
            let slot_looped = e.axes().iter().any(|a| looped.contains(a));
            if !slot_looped && e.as_axis() != Some(slot_axis.as_str()) {
                return Err(err(
                    &op.loc,
                    format!("index '{}' of '@{bname}' must be '@{slot_axis}' (whole range) or use an enclosing loop axis", e.to_custom()),
                ));
            }
            if slot_looped && e.axes().iter().any(|a| !looped.contains(a)) {
                return Err(err(
                    &op.loc,
                    format!(
                        "index '{}' mixes loop axes with axes no enclosing loop iterates",
                        e.to_custom()
                    ),
                ));
            }
        }
        // Looped axes of a dimension must be its outermost ones (tiles are contiguous boxes).
        for (d, binding) in buf.dims.iter().enumerate() {
            if let DimBinding::Axes(ax) = binding {
                let mut seen_whole = false;
                for a in ax {
                    let pos = slots
                        .iter()
                        .position(|(dd, s)| *dd == d && s == a)
                        .expect("slot");
                    let is_looped =
                        indices[pos].as_axis() != Some(a.as_str()) || looped.contains(&a.as_str());
                    if is_looped && seen_whole {
                        return Err(err(&op.loc, format!("dimension {d} of '@{bname}': loop axis '@{a}' is inside a whole-range axis (tile would not be contiguous)")));
                    }
                    seen_whole |= !is_looped;
                }
            }
        }
        Ok(Access {
            buffer: bname,
            indices,
            loc: op.loc.clone(),
        })
    }

    fn stmts(
        &mut self,
        ops: &[Operation],
        stack: &mut Vec<(String, Option<usize>)>,
    ) -> Result<Vec<Stmt>, Diagnostic> {
        let mut out = Vec::new();
        for op in ops {
            match op.name.as_str() {
                "commir.axis" | "commir.buffer" => {
                    if !stack.is_empty() {
                        return Err(err(
                            &op.loc,
                            format!(
                                "'{}' must be at the top of the kernel, not inside a loop",
                                op.name
                            ),
                        ));
                    }
                }
                "commir.for" => {
                    let axis = op
                        .attr("axis")
                        .and_then(|a| a.as_symbol())
                        .unwrap_or_default()
                        .to_string();
                    let ax = self.axes.iter().find(|a| a.name == axis).ok_or_else(|| {
                        err(&op.loc, format!("'@{axis}' is not an axis of this kernel"))
                    })?;
                    if stack.iter().any(|(a, _)| *a == axis) {
                        return Err(err(
                            &op.loc,
                            format!("axis '@{axis}' is already iterated by an enclosing loop"),
                        ));
                    }
                    let parallel = match op.attr("parallel").and_then(|a| a.as_int()) {
                        None => None,
                        Some(l) => {
                            let l = usize::try_from(l).ok().filter(|l| *l < self.mesh.shape.len()).ok_or_else(|| {
                                err(&op.loc, format!("mesh level {l} does not exist: mesh '@{}' has {} levels", self.mesh.name, self.mesh.shape.len()))
                            })?;
                            if ax.kind == AxisKind::Reduction {
                                return Err(err(&op.loc, format!("cannot parallelize '@{axis}': it is a plain reduction axis (mark it 'managed' to let the compiler combine partial results)")));
                            }
                            if ax.extent != self.mesh.shape[l] {
                                return Err(err(&op.loc, format!("parallel loop '@{axis}' has {} iterations but mesh level {l} has {} devices (tile first)", ax.extent, self.mesh.shape[l])));
                            }
                            if stack.iter().any(|(_, p)| *p == Some(l)) {
                                return Err(err(&op.loc, format!("mesh level {l} is already used by an enclosing parallel loop")));
                            }
                            Some(l)
                        }
                    };
                    let shift = op
                        .attr("shift")
                        .and_then(|a| a.as_symbol())
                        .map(String::from);
                    if let Some(s) = &shift {
                        if parallel.is_some() {
                            return Err(err(
                                &op.loc,
                                format!("loop '@{axis}' cannot be both parallel and shifted"),
                            ));
                        }
                        if !stack.iter().any(|(a, p)| a == s && p.is_some()) {
                            return Err(err(&op.loc, format!("loop '@{axis}' is shifted by '@{s}', which is not an enclosing parallel loop")));
                        }
                    }
                    stack.push((axis.clone(), parallel));
                    let body = self.stmts(op.body(0), stack)?;
                    stack.pop();
                    out.push(Stmt::For(ForLoop {
                        axis,
                        parallel,
                        shift,
                        body,
                        loc: op.loc.clone(),
                    }));
                }
                "commir.load" => {
                    let access = self.access(op, stack, true)?;
                    let buf = self
                        .buffers
                        .iter()
                        .find(|b| b.name == access.buffer)
                        .expect("checked");
                    let result = op
                        .results
                        .first()
                        .ok_or_else(|| err(&op.loc, "load needs a result"))?;
                    if tile_elem(&result.ty) != Some(buf.dtype.to_string().as_str()) {
                        return Err(err(
                            &op.loc,
                            format!(
                                "load of '@{}' must produce '!commir.tile<{}>', not '{}'",
                                buf.name, buf.dtype, result.ty
                            ),
                        ));
                    }
                    self.values.insert(result.id, result.ty.clone());
                    out.push(Stmt::Load {
                        result: result.id,
                        access,
                    });
                }
                "commir.patch" => {
                    let kernel = op
                        .attr("kernel")
                        .and_then(|a| a.as_str())
                        .unwrap_or_default()
                        .to_string();
                    let (nin, nout) = match kernel.as_str() {
                        "gemm" => (2, 1),
                        "attention" => (3, 2),
                        other => {
                            return Err(err(
                                &op.loc,
                                format!("unknown patch kernel '{other}' (known: gemm, attention)"),
                            ))
                        }
                    };
                    if op.operands.len() != nin || op.results.len() != nout {
                        return Err(err(&op.loc, format!("patch '{kernel}' takes {nin} tiles and produces {nout}, got {} and {}", op.operands.len(), op.results.len())));
                    }
                    for v in &op.operands {
                        if !self.values.contains_key(&v.id) || tile_elem(&v.ty).is_none() {
                            return Err(err(
                                &op.loc,
                                "patch operands must be tiles produced in this kernel",
                            ));
                        }
                    }
                    for r in &op.results {
                        if tile_elem(&r.ty).is_none() {
                            return Err(err(&op.loc, "patch results must be '!commir.tile<...>'"));
                        }
                        self.values.insert(r.id, r.ty.clone());
                    }
                    if kernel == "attention" {
                        if let Some(c) = op.attr("causal") {
                            c.as_bool()
                                .ok_or_else(|| err(&op.loc, "'causal' must be true or false"))?;
                        }
                        if let Some(s) = op.attr("scale") {
                            s.as_float()
                                .filter(|x| *x > 0.0)
                                .ok_or_else(|| err(&op.loc, "'scale' must be a positive number"))?;
                        }
                    }
                    let mut attrs = op.attrs.clone();
                    attrs.shift_remove("kernel");
                    out.push(Stmt::Patch {
                        kernel,
                        inputs: op.operands.iter().map(|v| v.id).collect(),
                        outputs: op.results.iter().map(|v| v.id).collect(),
                        attrs,
                        loc: op.loc.clone(),
                    });
                }
                "commir.reduce" => {
                    let kind = match op.attr("kind").and_then(|a| a.as_str()) {
                        Some("add") => ReduceKind::Add,
                        Some("lse_merge") => ReduceKind::LseMerge,
                        other => return Err(err(&op.loc, format!("unknown reduction {other:?}"))),
                    };
                    let want = if kind == ReduceKind::Add { 1 } else { 2 };
                    if op.operands.len() != want {
                        return Err(err(
                            &op.loc,
                            format!(
                                "reduction '{}' takes {want} value(s), got {}",
                                op.attr("kind").and_then(|a| a.as_str()).unwrap_or(""),
                                op.operands.len()
                            ),
                        ));
                    }
                    for v in &op.operands {
                        if !self.values.contains_key(&v.id) {
                            return Err(err(
                                &op.loc,
                                "reduced values must be tiles produced in this kernel",
                            ));
                        }
                    }
                    let access = self.access(op, stack, false)?;
                    out.push(Stmt::Reduce {
                        kind,
                        values: op.operands.iter().map(|v| v.id).collect(),
                        access,
                    });
                }
                "commir.store" => {
                    let v = op
                        .operands
                        .first()
                        .ok_or_else(|| err(&op.loc, "store needs a value"))?;
                    if !self.values.contains_key(&v.id) {
                        return Err(err(
                            &op.loc,
                            "stored value must be a tile produced in this kernel",
                        ));
                    }
                    let access = self.access(op, stack, false)?;
                    out.push(Stmt::Store {
                        value: v.id,
                        access,
                    });
                }
                "commir.reshard" => {
                    if !stack.is_empty() {
                        return Err(err(
                            &op.loc,
                            "'commir.reshard' must be at the top of the kernel",
                        ));
                    }
                    let buf = self.buffer_of(op)?;
                    let bname = buf.name.clone();
                    let sharding = sharding_from_attr(
                        op.attr("sharding")
                            .unwrap_or(&mercury_ir::Attribute::Array(vec![])),
                    )
                    .map_err(|m| err(&op.loc, m))?;
                    let shape: Vec<usize> =
                        buf.dims.iter().map(|d| dim_size(self.axes, d)).collect();
                    check_sharding(&bname, &sharding, &shape, self.mesh)
                        .map_err(|m| err(&op.loc, m))?;
                    out.push(Stmt::Reshard {
                        buffer: bname,
                        sharding,
                        loc: op.loc.clone(),
                    });
                }
                other => {
                    return Err(err(
                        &op.loc,
                        format!("'{other}' is not allowed inside a commir kernel"),
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// Models of every kernel in a module.
pub fn kernels(module: &Operation) -> Result<Vec<Kernel>, Diagnostic> {
    module
        .body(0)
        .iter()
        .filter(|o| o.name == "commir.kernel")
        .map(|k| Kernel::from_op(module, k))
        .collect()
}
