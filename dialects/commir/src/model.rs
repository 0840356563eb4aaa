//! A typed view of a `commir.kernel`: mesh, axes, buffers and the loop tree. Building it
//! checks the kernel's semantic rules (the dialect verifier calls it), and analyses, passes and
//! lowering read kernels through it.

pub use crate::ops::{check_placement, check_sharding};

use crate::attrs::DimBinding;
use crate::expr::IndexExpr;
use crate::ops::{
    AxisOp, BufferOp, DocumentsOp, ForOp, KernelOp, LoadOp, MeshOp, PatchOp, ReduceOp, ReshardOp,
    StoreOp,
};
use crate::placement::{Placement, Split};
use mercury_ir::{AttrDict, Diagnostic, Location, Operation, Type, ValueId};
use std::collections::{BTreeMap, HashMap};

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
        self.shape.iter().fold(1usize, |a, e| a.saturating_mul(*e))
    }
    /// `mesh '@m' has 2 levels (0 and 1)`: the levels that exist, for messages.
    pub fn levels_text(&self) -> String {
        match self.shape.len() {
            1 => format!("mesh '@{}' has 1 level (0)", self.name),
            n => format!("mesh '@{}' has {n} levels (0 to {})", self.name, n - 1),
        }
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
    /// How the levels of `sharding` split their dimensions, where not into contiguous blocks
    /// (zigzag, striped), by mesh level.
    pub splits: BTreeMap<usize, Split>,
    pub loc: Location,
}

impl Buffer {
    /// The buffer's placement: `sharding` with its splits.
    pub fn placement(&self) -> Placement {
        Placement::new(self.sharding.clone(), self.splits.clone())
    }
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

/// `commir.documents @name positions N`: run-time document boundaries (prefix sums over `N`
/// positions) that attention masks read (`mercury_plan::mask`); an input of every run, by
/// name.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentsDecl {
    pub name: String,
    pub positions: usize,
    pub loc: Location,
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

/// What `commir.mask` masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskKind {
    /// Key positions (last dimension) after the query position (second to last) become `-inf`.
    Causal,
}

/// A compiler-generated computation on tiles (`commir.matmul`, `commir.unary`, ...; the rules
/// are in `ops/compute.rs`, the semantics in `mercury_plan::tile`).
#[derive(Debug, Clone, PartialEq)]
pub enum Compute {
    Matmul {
        transpose_a: bool,
        transpose_b: bool,
    },
    Unary(mercury_plan::tile::UnaryFn),
    Binary(mercury_plan::tile::BinaryFn),
    /// Multiplication by a constant.
    Scale(f64),
    /// Addition of a constant.
    AddScalar(f64),
    /// The halves of each row rotated: `[-x2, x1]` (rotary position embeddings).
    RotateHalf,
    /// Conversion to the result's element type.
    Cast,
    Mask(MaskKind),
    RowReduce(mercury_plan::tile::RowReduceKind),
}

impl Compute {
    /// Whether the op is elementwise (a fused elementwise program can hold it).
    pub fn is_elementwise(&self) -> bool {
        !matches!(self, Compute::Matmul { .. } | Compute::RowReduce(_))
    }
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
    /// A compute op on tiles; `ty` is the result's element type.
    Compute {
        op: Compute,
        inputs: Vec<ValueId>,
        output: ValueId,
        ty: Type,
        loc: Location,
    },
    Reduce {
        kind: ReduceKind,
        values: Vec<ValueId>,
        access: Access,
        /// `lse @L` of an `lse_merge`: the buffer that keeps the merged log-sum-exp, indexed as
        /// the output without its last dimension (`ReduceOp::verify`).
        lse: Option<Access>,
        /// `carry` (the `carry` schedule primitive): a shifted sum whose accumulator travels
        /// from rank to rank with the pieces of the shifted loop and reaches the tile's owner
        /// after the last step (ring-flash-attn's dK/dV), instead of each step's partial going
        /// to the owner (shift-reduce).
        carry: bool,
    },
    Store {
        value: ValueId,
        access: Access,
    },
    Reshard {
        buffer: String,
        /// The new placement.
        to: Placement,
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
    /// Run-time document boundaries, in declaration order.
    pub documents: Vec<DocumentsDecl>,
    pub body: Vec<Stmt>,
    pub loc: Location,
    /// The tile every value of the body holds (`tiles.rs`): what passes prove matches with.
    pub tiles: HashMap<ValueId, crate::tiles::Tile>,
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

/// What the ops of a kernel body are checked against: the kernel's axes, buffers and mesh,
/// and the tiles defined so far (loads and patch results, with their types).
pub struct Scope<'a> {
    pub axes: &'a [Axis],
    pub buffers: &'a [Buffer],
    pub documents: &'a [DocumentsDecl],
    pub mesh: &'a Mesh,
    pub values: HashMap<ValueId, Type>,
    /// The tile each value holds (`tiles.rs`).
    pub tiles: HashMap<ValueId, crate::tiles::Tile>,
    /// The compute op that defined each value, with its operands (what `commir.reduce
    /// lse_merge` reads back to check its pair, `ops/body.rs`).
    pub defs: HashMap<ValueId, (Compute, Vec<ValueId>)>,
    /// The patch op that produced each value: (its first result, which names the op; the
    /// value's position among its results). `lse_merge` checks that a pair of patch results is
    /// one patch's (o, lse), `ops/body.rs`.
    pub patch_results: HashMap<ValueId, (ValueId, usize)>,
}

impl Scope<'_> {
    /// Size of a buffer dimension under the kernel's axes.
    pub fn dim_size(&self, d: &DimBinding) -> usize {
        dim_size(self.axes, d)
    }
}

impl Kernel {
    /// Builds and checks the model of `kernel` (a `commir.kernel` op) inside `module`: each op
    /// by its own `verify` (`ops/`), in program order, plus the kernel-wide rules: the mesh
    /// symbol names a mesh of the module, declarations come before the statements and at the
    /// top level, and only CommIR body ops appear in the body.
    pub fn from_op(module: &Operation, kernel: &Operation) -> Result<Kernel, Diagnostic> {
        let name = kernel.symbol_name().unwrap_or_default().to_string();
        let mesh_name = KernelOp::cast(kernel)
            .and_then(|k| k.mesh())
            .ok_or_else(|| err(&kernel.loc, "kernel needs a mesh symbol"))?;
        let mesh_op = module
            .body(0)
            .iter()
            .filter_map(MeshOp::cast)
            .find(|o| o.sym_name().as_deref() == Some(mesh_name.as_str()))
            .ok_or_else(|| {
                err(
                    &kernel.loc,
                    format!("'@{mesh_name}' does not name a commir.mesh in the module"),
                )
            })?;
        let mesh = mesh_op.verify()?;
        let mut axes: Vec<Axis> = Vec::new();
        let mut buffers: Vec<Buffer> = Vec::new();
        let mut documents: Vec<DocumentsDecl> = Vec::new();
        for op in kernel.body(0) {
            if let Some(a) = AxisOp::cast(op) {
                axes.push(a.verify()?);
            } else if let Some(b) = BufferOp::cast(op) {
                buffers.push(b.verify(&axes, &mesh)?);
            } else if let Some(d) = DocumentsOp::cast(op) {
                documents.push(d.verify()?);
            }
        }
        let mut scope = Scope {
            axes: &axes,
            buffers: &buffers,
            documents: &documents,
            mesh: &mesh,
            values: HashMap::new(),
            tiles: HashMap::new(),
            defs: HashMap::new(),
            patch_results: HashMap::new(),
        };
        let mut stack = Vec::new();
        let body = stmts(&mut scope, kernel.body(0), &mut stack)?;
        let tiles = scope.tiles;
        let k = Kernel {
            name,
            mesh,
            axes,
            buffers,
            documents,
            body,
            loc: kernel.loc.clone(),
            tiles,
        };
        k.check_kept_lse()?;
        Ok(k)
    }

    /// A buffer that keeps a merged log-sum-exp (`commir.reduce lse_merge ... into @O lse @L`)
    /// is written by nothing else: no store or reduction into it, and the log-sum-exp of no
    /// other output (each would keep part of the story).
    fn check_kept_lse(&self) -> Result<(), Diagnostic> {
        let mut kept: Vec<(&str, &str, &Location)> = Vec::new();
        self.walk(&mut |s, _| {
            if let Stmt::Reduce {
                access,
                lse: Some(l),
                ..
            } = s
            {
                kept.push((&l.buffer, &access.buffer, &l.loc));
            }
        });
        let mut result = Ok(());
        self.walk(&mut |s, _| {
            let written = match s {
                Stmt::Reduce { access, .. } | Stmt::Store { access, .. } => access,
                _ => return,
            };
            let Some((l, o, loc)) = kept.iter().find(|(l, _, _)| *l == written.buffer) else {
                return;
            };
            if result.is_ok() {
                result = Err(err(
                    &written.loc,
                    format!("'@{l}' keeps the log-sum-exp of '@{o}' (lse @{l}); it cannot be written otherwise"),
                )
                .with_note((*loc).clone(), "the log-sum-exp is kept here"));
            }
        });
        for (i, (l, o, loc)) in kept.iter().enumerate() {
            if let Some((_, o2, loc2)) = kept[..i].iter().find(|(l2, o2, _)| l2 == l && o2 != o) {
                return Err(err(
                    loc,
                    format!("'@{l}' keeps the log-sum-exp of '@{o2}' already; '@{o}' needs a buffer of its own"),
                )
                .with_note((*loc2).clone(), "the first is kept here"));
            }
        }
        result
    }
}

/// Size of a buffer dimension under `axes`.
fn dim_size(axes: &[Axis], d: &DimBinding) -> usize {
    match d {
        DimBinding::Fixed(n) => *n as usize,
        DimBinding::Axes(a) => a
            .iter()
            .map(|x| axes.iter().find(|y| &y.name == x).map_or(1, |y| y.extent))
            .fold(1usize, |a, e| a.saturating_mul(e)),
    }
}

/// The statements of a body, each op checked by its own `verify` in program order.
fn stmts(
    scope: &mut Scope,
    ops: &[Operation],
    stack: &mut Vec<(String, Option<usize>)>,
) -> Result<Vec<Stmt>, Diagnostic> {
    let mut out = Vec::new();
    for op in ops {
        if crate::ops::is_decl(op) {
            if !stack.is_empty() {
                return Err(err(
                    &op.loc,
                    format!(
                        "'{}' must be at the top of the kernel, not inside a loop",
                        op.name
                    ),
                ));
            }
        } else if let Some(f) = ForOp::cast(op) {
            let (axis, parallel, shift) = f.verify(scope, stack)?;
            stack.push((axis.clone(), parallel));
            let body = stmts(scope, f.ops(), stack)?;
            stack.pop();
            out.push(Stmt::For(ForLoop {
                axis,
                parallel,
                shift,
                body,
                loc: op.loc.clone(),
            }));
        } else if let Some(l) = LoadOp::cast(op) {
            let (result, access) = l.verify(scope, stack)?;
            out.push(Stmt::Load { result, access });
        } else if let Some(p) = PatchOp::cast(op) {
            let kernel = p.verify(scope)?;
            let mut attrs = op.attrs.clone();
            attrs.shift_remove("kernel");
            out.push(Stmt::Patch {
                kernel,
                inputs: op.operands.iter().map(|v| v.id).collect(),
                outputs: op.results.iter().map(|v| v.id).collect(),
                attrs,
                loc: op.loc.clone(),
            });
        } else if let Some(c) = crate::ops::compute_stmt(scope, op)? {
            out.push(c);
        } else if let Some(r) = ReduceOp::cast(op) {
            let (kind, access, lse) = r.verify(scope, stack)?;
            out.push(Stmt::Reduce {
                kind,
                values: op.operands.iter().map(|v| v.id).collect(),
                access,
                lse,
                carry: r.carry().unwrap_or(false),
            });
        } else if let Some(st) = StoreOp::cast(op) {
            let (value, access) = st.verify(scope, stack)?;
            out.push(Stmt::Store { value, access });
        } else if let Some(r) = ReshardOp::cast(op) {
            let (buffer, to) = r.verify(scope, stack)?;
            out.push(Stmt::Reshard {
                buffer,
                to,
                loc: op.loc.clone(),
            });
        } else {
            return Err(err(
                &op.loc,
                format!("'{}' is not allowed inside a commir kernel", op.name),
            ));
        }
    }
    Ok(out)
}

/// `@gemm, @lw`: the kernels' names, for messages that ask for one of them.
pub fn kernel_names(kernels: &[Kernel]) -> String {
    kernels
        .iter()
        .map(|k| format!("@{}", k.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Models of every kernel in a module.
pub fn kernels(module: &Operation) -> Result<Vec<Kernel>, Diagnostic> {
    module
        .body(0)
        .iter()
        .filter(|o| KernelOp::cast(*o).is_some())
        .map(|k| Kernel::from_op(module, k))
        .collect()
}
