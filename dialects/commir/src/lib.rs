//! The CommIR dialect: distributed operators as loop nests over named axes, with buffers bound
//! to axes and placed on a device mesh, loops parallelized over mesh levels or shifted, and
//! local library kernels (patches). See `docs/dialect.md`.

pub mod attrs;
pub mod expr;
pub mod model;
pub mod ops;

pub use attrs::DimBinding;
pub use expr::IndexExpr;
pub use model::{
    kernels, Access, Axis, AxisKind, Buffer, ForLoop, Kernel, Mesh, ReduceKind, Role, Stmt,
};

use mercury_ir::Registry;

/// Registers the CommIR dialect.
pub fn register(registry: &mut Registry) {
    registry.register(&ops::COMMIR);
}

/// A registry with the builtin dialects and CommIR.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    register(&mut r);
    r
}

/// The IRDL definition of the dialect, for upstream `mlir-opt --irdl-file`.
pub const IRDL: &str = include_str!("../commir.irdl.mlir");
