//! The dialects every tool registers, as upstream MLIR defines them: `builtin` (`module`,
//! `unrealized_conversion_cast`), `func` (`func.rs`) and `arith` (`arith.rs`), with their
//! custom assembly, traits and verifiers.

mod arith;
mod func;

pub use arith::ARITH;
pub use func::FUNC;

use crate::diag::Diagnostic;
use crate::ir::Operation;
use crate::registry::{ArgDef, AttrDef, AttrKind, Dialect, OpAsm, OpDef, Trait, VerifyContext};
use crate::types::Type;

pub static BUILTIN: Dialect = Dialect {
    name: "builtin",
    summary: "The top-level module and the cast that conversions leave.",
    ops: &[
        OpDef {
            name: "builtin.module",
            summary: "A container of top-level operations; a symbol table.",
            operands: &[],
            results: &[],
            attrs: &[
                AttrDef::opt("sym_name", AttrKind::SymbolName),
                AttrDef::opt("sym_visibility", AttrKind::String),
            ],
            regions: &["body"],
            traits: &[
                // An optional symbol: a symbol when it has a name (`builtin.module @m`).
                Trait::Symbol,
                Trait::SymbolTable,
                Trait::IsolatedFromAbove,
                Trait::SingleBlock,
                Trait::NoRegionArguments,
                Trait::NoTerminator,
                Trait::DefaultDialect("builtin"),
            ],
            format: Some("($sym_name^)? attr-dict-with-keyword $body"),
            verify: Some(verify_module),
        },
        OpDef {
            name: "builtin.unrealized_conversion_cast",
            summary: "A cast between types that a partial conversion leaves for a later one.",
            operands: &[ArgDef::many("inputs")],
            results: &[ArgDef::many("outputs")],
            attrs: &[],
            regions: &[],
            traits: &[Trait::Pure],
            format: Some("($inputs^ `:` type($inputs))? `to` type(results) attr-dict"),
            verify: Some(verify_cast),
        },
    ],
};

fn verify_module(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let plain = op
        .attrs
        .keys()
        .any(|k| !k.contains('.') && k != "sym_name" && k != "sym_visibility");
    if plain {
        return Err(op_error(
            op,
            "can only contain attributes with dialect-prefixed names, found: ".to_string()
                + &op
                    .attrs
                    .keys()
                    .filter(|k| !k.contains('.') && *k != "sym_name" && *k != "sym_visibility")
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", "),
        ));
    }
    Ok(())
}

fn verify_cast(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    if op.results.is_empty() {
        return Err(op_error(
            op,
            "expected at least one result for cast operation",
        ));
    }
    Ok(())
}

/// The hand-written assemblies of the builtin, func and arith ops.
pub(crate) static ASM: &[(&str, &OpAsm)] = &[
    ("func.func", &func::FUNC_ASM),
    ("func.call", &func::CALL_ASM),
    ("func.call_indirect", &func::CALL_INDIRECT_ASM),
    ("func.constant", &func::CONSTANT_ASM),
    ("func.return", &func::RETURN_ASM),
    ("arith.constant", &arith::CONSTANT_ASM),
    ("arith.select", &arith::SELECT_ASM),
    ("arith.cmpi", &arith::CMP_ASM),
    ("arith.cmpf", &arith::CMP_ASM),
    ("arith.addi", &arith::BINARY_ASM),
    ("arith.subi", &arith::BINARY_ASM),
    ("arith.muli", &arith::BINARY_ASM),
    ("arith.shli", &arith::BINARY_ASM),
    ("arith.divui", &arith::BINARY_ASM),
    ("arith.divsi", &arith::BINARY_ASM),
    ("arith.shrui", &arith::BINARY_ASM),
    ("arith.shrsi", &arith::BINARY_ASM),
    ("arith.ceildivui", &arith::BINARY_ASM),
    ("arith.ceildivsi", &arith::BINARY_ASM),
    ("arith.floordivsi", &arith::BINARY_ASM),
    ("arith.remui", &arith::BINARY_ASM),
    ("arith.remsi", &arith::BINARY_ASM),
    ("arith.andi", &arith::BINARY_ASM),
    ("arith.ori", &arith::BINARY_ASM),
    ("arith.xori", &arith::BINARY_ASM),
    ("arith.maxsi", &arith::BINARY_ASM),
    ("arith.maxui", &arith::BINARY_ASM),
    ("arith.minsi", &arith::BINARY_ASM),
    ("arith.minui", &arith::BINARY_ASM),
    ("arith.addf", &arith::BINARY_ASM),
    ("arith.subf", &arith::BINARY_ASM),
    ("arith.mulf", &arith::BINARY_ASM),
    ("arith.divf", &arith::BINARY_ASM),
    ("arith.remf", &arith::BINARY_ASM),
    ("arith.maximumf", &arith::BINARY_ASM),
    ("arith.maxnumf", &arith::BINARY_ASM),
    ("arith.minimumf", &arith::BINARY_ASM),
    ("arith.minnumf", &arith::BINARY_ASM),
    ("arith.negf", &arith::BINARY_ASM),
    ("arith.addui_extended", &arith::EXTENDED_ASM),
    ("arith.mulsi_extended", &arith::EXTENDED_ASM),
    ("arith.mului_extended", &arith::EXTENDED_ASM),
    ("arith.extui", &arith::CAST_ASM),
    ("arith.extsi", &arith::CAST_ASM),
    ("arith.extf", &arith::CAST_ASM),
    ("arith.trunci", &arith::CAST_ASM),
    ("arith.truncf", &arith::CAST_ASM),
    ("arith.uitofp", &arith::CAST_ASM),
    ("arith.sitofp", &arith::CAST_ASM),
    ("arith.fptoui", &arith::CAST_ASM),
    ("arith.fptosi", &arith::CAST_ASM),
    ("arith.index_cast", &arith::CAST_ASM),
    ("arith.index_castui", &arith::CAST_ASM),
    ("arith.bitcast", &arith::CAST_ASM),
    ("arith.scaling_extf", &arith::CAST_ASM),
    ("arith.scaling_truncf", &arith::CAST_ASM),
];

/// `'op.name' op message`, at the op.
pub(crate) fn op_error(op: &Operation, msg: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(op.loc.clone(), format!("'{}' op {msg}", op.name))
}

/// A type or, for a vector or tensor, its element type: what "...-like" constraints test.
pub(crate) fn elem_of_like(t: &Type) -> Option<&Type> {
    match t {
        Type::Vector { elem, .. } | Type::Tensor { elem, .. } => Some(elem),
        Type::MemRef { .. } => None,
        t => Some(t),
    }
}
