//! The builtin, func and arith ops the tools need.

use crate::diag::Diagnostic;
use crate::ir::Operation;
use crate::registry::{ArgDef, AttrDef, AttrKind, Dialect, OpDef, Trait, VerifyContext};
use crate::types::Type;

pub static BUILTIN: Dialect = Dialect {
    name: "builtin",
    summary: "The top-level module.",
    ops: &[OpDef {
        name: "builtin.module",
        summary: "A container of top-level operations; a symbol table.",
        operands: &[],
        results: &[],
        attrs: &[AttrDef::opt("sym_name", AttrKind::SymbolName)],
        regions: &["body"],
        traits: &[
            Trait::SymbolTable,
            Trait::IsolatedFromAbove,
            Trait::SingleBlock,
            Trait::NoRegionArguments,
        ],
        format: Some("($sym_name^)? attr-dict-with-keyword $body"),
        verify: None,
    }],
};

fn verify_func(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(Type::Function { inputs, .. }) = op.attr("function_type").and_then(|a| a.as_type())
    else {
        return Err(Diagnostic::error(
            op.loc.clone(),
            "'func.func' needs a function type in 'function_type'",
        ));
    };
    if let Some(entry) = op.regions.first().and_then(|r| r.entry()) {
        let args: Vec<&Type> = entry.args.iter().map(|a| &a.ty).collect();
        if args.len() != inputs.len() || args.iter().zip(inputs).any(|(a, b)| *a != b) {
            return Err(Diagnostic::error(
                op.loc.clone(),
                "entry block arguments do not match the function type",
            ));
        }
    }
    Ok(())
}

fn verify_return(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(parent) = ctx.parent() else {
        return Ok(());
    };
    if parent.name != "func.func" {
        return Err(Diagnostic::error(
            op.loc.clone(),
            format!(
                "'func.return' must be inside 'func.func', not '{}'",
                parent.name
            ),
        ));
    }
    if let Some(Type::Function { results, .. }) =
        parent.attr("function_type").and_then(|a| a.as_type())
    {
        let got: Vec<&Type> = op.operands.iter().map(|v| &v.ty).collect();
        if got.len() != results.len() || got.iter().zip(results).any(|(a, b)| *a != b) {
            return Err(Diagnostic::error(
                op.loc.clone(),
                "returned values do not match the function result types",
            ));
        }
    }
    Ok(())
}

pub static FUNC: Dialect = Dialect {
    name: "func",
    summary: "Functions.",
    ops: &[
        OpDef {
            name: "func.func",
            summary: "A function (generic form).",
            operands: &[],
            results: &[],
            attrs: &[
                AttrDef::req("sym_name", AttrKind::String),
                AttrDef::req("function_type", AttrKind::Type),
            ],
            regions: &["body"],
            traits: &[Trait::Symbol, Trait::IsolatedFromAbove],
            format: None,
            verify: Some(verify_func),
        },
        OpDef {
            name: "func.return",
            summary: "Returns from a function.",
            operands: &[ArgDef::many("operands")],
            results: &[],
            attrs: &[],
            regions: &[],
            traits: &[Trait::Terminator],
            format: Some("attr-dict ($operands^ `:` type($operands))?"),
            verify: Some(verify_return),
        },
    ],
};

fn verify_same_types(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(first) = op.results.first() else {
        return Ok(());
    };
    if op.operands.iter().any(|v| v.ty != first.ty) {
        return Err(Diagnostic::error(
            op.loc.clone(),
            format!(
                "'{}' requires operands and result of the same type",
                op.name
            ),
        ));
    }
    Ok(())
}

fn verify_constant(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let ty = op.results.first().map(|r| &r.ty);
    match (op.attr("value"), ty) {
        (Some(crate::Attribute::Integer { ty: at, .. }), Some(rt))
        | (Some(crate::Attribute::Float { ty: at, .. }), Some(rt))
            if at == rt =>
        {
            Ok(())
        }
        _ => Err(Diagnostic::error(
            op.loc.clone(),
            "'arith.constant' value type must match its result type",
        )),
    }
}

const BINARY: &[ArgDef] = &[ArgDef::one("lhs"), ArgDef::one("rhs")];
const ONE_RESULT: &[ArgDef] = &[ArgDef::one("result")];

const fn binary(name: &'static str, summary: &'static str) -> OpDef {
    OpDef {
        name,
        summary,
        operands: BINARY,
        results: ONE_RESULT,
        attrs: &[],
        regions: &[],
        traits: &[Trait::Pure],
        format: Some("$lhs `,` $rhs attr-dict `:` type(results)"),
        verify: Some(verify_same_types),
    }
}

pub static ARITH: Dialect = Dialect {
    name: "arith",
    summary: "Scalar arithmetic.",
    ops: &[
        OpDef {
            name: "arith.constant",
            summary: "A constant (generic form).",
            operands: &[],
            results: ONE_RESULT,
            attrs: &[AttrDef::req("value", AttrKind::Any)],
            regions: &[],
            traits: &[Trait::Pure],
            format: None,
            verify: Some(verify_constant),
        },
        binary("arith.addi", "Integer addition."),
        binary("arith.muli", "Integer multiplication."),
        binary("arith.addf", "Float addition."),
        binary("arith.mulf", "Float multiplication."),
    ],
};
