//! The CommIR dialect: distributed operators as loop nests over named axes, with buffers bound
//! to axes and placed on a device mesh, loops parallelized over mesh levels or shifted, and
//! local library kernels (patches). See `docs/dialect.md`.

pub mod attrs;
pub mod deps;
pub mod expr;
pub mod model;
pub mod ops;
pub mod pass;
pub mod placement;
pub mod tiles;

pub use attrs::DimBinding;
pub use expr::IndexExpr;
pub use model::{
    kernel_names, kernels, Access, Axis, AxisKind, Buffer, Compute, DocumentsDecl, ForLoop, Kernel,
    MaskKind, Mesh, ReduceKind, Role, Stmt,
};
pub use ops::{outer_batches, trailing_operand, MAX_DEVICES, MAX_EXTENT};
pub use placement::{Placement, Split};

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

/// The IRDL definition of the dialect, for upstream `mlir-opt --irdl-file`: the checked-in
/// `commir.irdl.mlir`, which a test keeps equal to [`irdl`] (generated from the op
/// definitions).
pub const IRDL: &str = include_str!("../commir.irdl.mlir");

/// The IRDL definition generated from the op definitions in `ops.rs`.
pub fn irdl() -> String {
    mercury_ir::irdl::export(
        &ops::COMMIR,
        &[
            "IRDL definition of the CommIR dialect, so that upstream MLIR accepts CommIR in generic form:",
            "  mercury-opt --mlir-print-op-generic X.mlir | mlir-opt-22 --irdl-file=dialects/commir/commir.irdl.mlir",
            "Generated from the op definitions (dialects/commir/src/ops/mod.rs); regenerate with",
            "  MERCURY_WRITE_IRDL=1 cargo test -p mercury-commir --lib irdl",
            "Attributes use builtin kinds (strings, integers, arrays, symbol references, types); the",
            "checks beyond their kinds are the Rust verifier's. Optional attributes are not listed.",
            "IRDL constraint variables bind one value: the values of one operand or result group share",
            "an element type.",
        ],
        ops::TYPES,
        ops::VALUE_TYPE,
    )
}

#[cfg(test)]
mod tests {
    /// The checked-in IRDL file is the one the op definitions generate (with
    /// `MERCURY_WRITE_IRDL=1`, the test writes it instead).
    #[test]
    fn irdl_file_is_generated_from_the_definitions() {
        let generated = super::irdl();
        if std::env::var_os("MERCURY_WRITE_IRDL").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/commir.irdl.mlir");
            std::fs::write(path, &generated).expect("write commir.irdl.mlir");
            return;
        }
        assert_eq!(
            super::IRDL,
            generated,
            "dialects/commir/commir.irdl.mlir is stale: regenerate it with \
             MERCURY_WRITE_IRDL=1 cargo test -p mercury-commir --lib irdl"
        );
    }
}
