//! The IR core of Mercury-rs: MLIR-style operations, regions, blocks, typed SSA values,
//! builtin types and attributes, locations and diagnostics, a registry of declaratively
//! defined ops, the textual syntax (generic form and custom assembly formats, parsed with
//! pest), a verifier and a pass manager. It links no LLVM.

pub mod attributes;
pub mod builtin;
pub mod diag;
pub mod expect;
pub mod ir;
pub mod irdl;
pub mod pass;
pub mod registry;
pub mod syntax;
pub mod transforms;
pub mod types;
pub mod verify;

pub use attributes::Attribute;
pub use diag::{Diagnostic, Location, Severity, SourceFile};
pub use ir::{module, AttrDict, Block, Operation, Region, Value, ValueId};
pub use registry::{
    ArgDef, AttrDef, AttrKind, CustomAttrSyntax, Dialect, OpDef, Registry, Trait, VerifyContext,
};
pub use syntax::parser::{parse_source, parse_str};
pub use syntax::printer::{print_op, PrintOptions};
pub use types::Type;
pub use verify::verify;
