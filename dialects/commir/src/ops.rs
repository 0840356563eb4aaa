//! The CommIR ops: one declarative definition each.

use crate::attrs::{DIMS, INDICES, SHARDING};
use crate::model::{mesh_from_op, Kernel};
use mercury_ir::{
    ArgDef, AttrDef, AttrKind, Diagnostic, Dialect, OpDef, Operation, Trait, VerifyContext,
};

fn verify_mesh(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    mesh_from_op(op).map(|_| ())
}

fn verify_kernel(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    let module = ctx.parent().ok_or_else(|| {
        Diagnostic::error(op.loc.clone(), "'commir.kernel' must be inside a module")
    })?;
    if module.name != "builtin.module" {
        return Err(Diagnostic::error(
            op.loc.clone(),
            "'commir.kernel' must be a top-level op of a module",
        ));
    }
    Kernel::from_op(module, op).map(|_| ())
}

/// Body ops are checked by their kernel's model; here only that they sit in a kernel.
fn verify_in_kernel(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    match ctx.parent() {
        Some(p) if p.name == "commir.kernel" || p.name == "commir.for" => Ok(()),
        _ => Err(Diagnostic::error(
            op.loc.clone(),
            format!("'{}' must be inside a 'commir.kernel'", op.name),
        )),
    }
}

/// Upstream MLIR requires a terminator at the end of every region of an op that is not known
/// to need none, and IRDL cannot declare that trait. CommIR regions therefore end with an
/// implicit terminator that only the generic form spells out, as `transform.yield` (an
/// upstream terminator with no payload semantics and no parent constraint).
pub const UPSTREAM_TERMINATOR: &str = "transform.yield";

const MESH_ATTRS: &[AttrDef] = &[
    AttrDef::req("sym_name", AttrKind::SymbolName),
    AttrDef::req("shape", AttrKind::IntArray),
    AttrDef::opt("names", AttrKind::Any),
    AttrDef::opt("bandwidth", AttrKind::Any),
];

const ACCESS_ATTRS: &[AttrDef] = &[
    AttrDef::req("buffer", AttrKind::SymbolRef),
    AttrDef::req("indices", AttrKind::Custom(&INDICES)),
];

pub static OPS: &[OpDef] = &[
    OpDef {
        name: "commir.mesh",
        summary: "An N-D device mesh, levels ordered from slowest (inter-node) to fastest.",
        operands: &[],
        results: &[],
        attrs: MESH_ATTRS,
        regions: &[],
        traits: &[Trait::Symbol],
        format: Some("$sym_name `shape` $shape (`names` $names^)? (`bandwidth` $bandwidth^)? attr-dict"),
        verify: Some(verify_mesh),
    },
    OpDef {
        name: "commir.kernel",
        summary: "A distributed operator: axes, buffers and a loop nest mapped onto a mesh.",
        operands: &[],
        results: &[],
        attrs: &[AttrDef::req("sym_name", AttrKind::SymbolName), AttrDef::req("mesh", AttrKind::SymbolRef)],
        regions: &["body"],
        traits: &[Trait::Symbol, Trait::SymbolTable, Trait::IsolatedFromAbove, Trait::ImplicitTerminator(UPSTREAM_TERMINATOR)],
        format: Some("$sym_name `on` $mesh attr-dict-with-keyword $body"),
        verify: Some(verify_kernel),
    },
    OpDef {
        name: "commir.axis",
        summary: "A loop axis: extent, kind (spatial, reduction, managed) and minimum block.",
        operands: &[],
        results: &[],
        attrs: &[
            AttrDef::req("sym_name", AttrKind::SymbolName),
            AttrDef::req("extent", AttrKind::Int),
            AttrDef::req("kind", AttrKind::Keyword(&["spatial", "reduction", "managed"])),
            AttrDef::opt("min_block", AttrKind::Int),
        ],
        regions: &[],
        traits: &[Trait::Symbol],
        format: Some("$sym_name `=` $extent $kind (`min` $min_block^)? attr-dict"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.buffer",
        summary: "A tensor bound to axes per dimension, with a role and a sharding over the mesh.",
        operands: &[],
        results: &[],
        attrs: &[
            AttrDef::req("sym_name", AttrKind::SymbolName),
            AttrDef::req("dims", AttrKind::Custom(&DIMS)),
            AttrDef::req("dtype", AttrKind::Type),
            AttrDef::req("role", AttrKind::Keyword(&["in", "out", "inout", "temp"])),
            AttrDef::opt("sharding", AttrKind::Custom(&SHARDING)),
        ],
        regions: &[],
        traits: &[Trait::Symbol],
        format: Some("$sym_name `:` $dims $dtype $role (`sharding` $sharding^)? attr-dict"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.for",
        summary: "A loop over an axis; optionally parallel over a mesh level or shifted by a parallel loop.",
        operands: &[],
        results: &[],
        attrs: &[
            AttrDef::req("axis", AttrKind::SymbolRef),
            AttrDef::opt("parallel", AttrKind::Int),
            AttrDef::opt("shift", AttrKind::SymbolRef),
        ],
        regions: &["body"],
        traits: &[Trait::ImplicitTerminator(UPSTREAM_TERMINATOR)],
        format: Some("$axis (`parallel` `(` $parallel `)`)? (`shift` `(` $shift `)`)? attr-dict $body"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.load",
        summary: "Reads the tile of a buffer selected by the indices (whole range for unlooped axes).",
        operands: &[],
        results: &[ArgDef::one("tile")],
        attrs: ACCESS_ATTRS,
        regions: &[],
        traits: &[Trait::Pure],
        format: Some("$buffer $indices attr-dict `:` type(results)"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.patch",
        summary: "A local library kernel (gemm, attention) applied to tiles.",
        operands: &[ArgDef::many("inputs")],
        results: &[ArgDef::many("outputs")],
        attrs: &[AttrDef::req("kernel", AttrKind::String)],
        regions: &[],
        traits: &[Trait::Pure],
        format: Some("$kernel `(` $inputs `)` attr-dict `:` functional-type(operands, results)"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.reduce",
        summary: "Combines tiles into a buffer tile (add, or the softmax lse merge).",
        operands: &[ArgDef::many("values")],
        results: &[],
        attrs: &[
            AttrDef::req("kind", AttrKind::Keyword(&["add", "lse_merge"])),
            AttrDef::req("buffer", AttrKind::SymbolRef),
            AttrDef::req("indices", AttrKind::Custom(&INDICES)),
        ],
        regions: &[],
        traits: &[],
        format: Some("$kind $values `into` $buffer $indices attr-dict `:` type($values)"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.store",
        summary: "Writes a tile into a buffer tile.",
        operands: &[ArgDef::one("value")],
        results: &[],
        attrs: ACCESS_ATTRS,
        regions: &[],
        traits: &[],
        format: Some("$value `into` $buffer $indices attr-dict `:` type($value)"),
        verify: Some(verify_in_kernel),
    },
    OpDef {
        name: "commir.reshard",
        summary: "Changes a buffer's placement at this point (an all-to-all or gather).",
        operands: &[],
        results: &[],
        attrs: &[AttrDef::req("buffer", AttrKind::SymbolRef), AttrDef::req("sharding", AttrKind::Custom(&SHARDING))],
        regions: &[],
        traits: &[],
        format: Some("$buffer `to` $sharding attr-dict"),
        verify: Some(verify_in_kernel),
    },
];

pub static COMMIR: Dialect = Dialect {
    name: "commir",
    summary: "Loop nests with distribution annotations: communication as a property of loop mapping and buffer placement.",
    ops: OPS,
};
