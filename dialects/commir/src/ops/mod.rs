//! The CommIR ops, each declared once: [`commir_ops!`] turns one declaration into the op's
//! [`OpDef`] (what the parser, printer, structural verifier and IRDL export read) and its
//! typed view ([`ForOp`], [`LoadOp`], ...: `cast`, one getter and setter per attribute).
//! Each op's own rules are its view's `verify` (in `decl.rs`, `loops.rs`, `body.rs`); the
//! rules that span a kernel are `model.rs`'s.

mod body;
mod compute;
mod decl;
mod loops;

pub use compute::{compute_stmt, outer_batches, trailing_operand};
pub use decl::{check_placement, check_sharding, MAX_DEVICES, MAX_EXTENT};

use crate::attrs::{
    AnyAttr, AttrValue, BinaryAttr, Dims, Flag, Float, Indices, Int, IntArray, RowReduceAttr,
    Sharding, Str, SymName, SymRef, TypeAttr, UnaryAttr,
};
use crate::model::{AxisKind, Kernel, MaskKind, ReduceKind, Role};
use mercury_ir::{ArgDef, AttrDef, Diagnostic, Dialect, OpDef, Operation, Trait, VerifyContext};
use std::ops::{Deref, DerefMut};

/// Declares the CommIR ops: the `OPS` table and one typed view per op.
///
/// A view wraps `&Operation` (getters) or `&mut Operation` (getters and setters); an
/// attribute declared `req` must be present, one declared `opt` may be absent (and gets a
/// `remove_` method). Getters return `None` when the attribute is absent or malformed, so they
/// never panic on unverified IR; `read_<attr>` says why a present attribute is malformed.
macro_rules! commir_ops {
    ($(
        $(#[$doc:meta])*
        $view:ident = $name:literal {
            summary: $summary:literal,
            operands: [$($operand:expr),* $(,)?],
            results: [$($result:expr),* $(,)?],
            attrs: { $($req:ident $attr:ident : $aty:ty),* $(,)? },
            regions: [$($region:literal),* $(,)?],
            traits: [$($trait:expr),* $(,)?],
            format: $format:literal,
            verify: $verify:path $(,)?
        }
    )*) => {
        /// Every CommIR op definition, in declaration order.
        pub static OPS: &[OpDef] = &[$(
            OpDef {
                name: $name,
                summary: $summary,
                operands: &[$($operand),*],
                results: &[$($result),*],
                attrs: &[$(commir_ops!(@def $req $attr $aty)),*],
                regions: &[$($region),*],
                traits: &[$($trait),*],
                format: Some($format),
                verify: Some($verify),
            }
        ),*];
        $(
            $(#[$doc])*
            #[doc = concat!("\n\nTyped view of `", $name, "`: `", stringify!($view), "::cast(&op)` or `cast(&mut op)`.")]
            #[derive(Debug, Clone, Copy)]
            pub struct $view<O>(O);

            impl<O: Deref<Target = Operation>> $view<O> {
                /// The op's name.
                pub const NAME: &'static str = $name;
                /// The view, if `op` is this op.
                pub fn cast(op: O) -> Option<Self> {
                    (op.name == $name).then_some($view(op))
                }
                /// The viewed operation.
                pub fn op(&self) -> &Operation {
                    &self.0
                }
                $(paste::paste! {
                    #[doc = concat!("The `", stringify!($attr), "` attribute; `None` when absent or malformed.")]
                    pub fn $attr(&self) -> Option<<$aty as AttrValue>::Value> {
                        self.0.attr(stringify!($attr)).and_then(|a| <$aty as AttrValue>::read(a).ok())
                    }
                    #[doc = concat!("The `", stringify!($attr), "` attribute (`Ok(None)` when absent), or why it is malformed.")]
                    pub fn [<read_ $attr>](&self) -> Result<Option<<$aty as AttrValue>::Value>, String> {
                        self.0.attr(stringify!($attr)).map(<$aty as AttrValue>::read).transpose()
                    }
                })*
            }

            impl<O: DerefMut<Target = Operation>> $view<O> {
                $(paste::paste! {
                    #[doc = concat!("Sets the `", stringify!($attr), "` attribute.")]
                    pub fn [<set_ $attr>](&mut self, v: impl Into<<$aty as AttrValue>::Value>) {
                        self.0.set_attr(stringify!($attr), <$aty as AttrValue>::write(&v.into()));
                    }
                    commir_ops!(@remove $req $attr);
                })*
            }
        )*
    };
    (@def req $attr:ident $aty:ty) => { AttrDef::req(stringify!($attr), <$aty as AttrValue>::KIND) };
    (@def opt $attr:ident $aty:ty) => { AttrDef::opt(stringify!($attr), <$aty as AttrValue>::KIND) };
    (@remove req $attr:ident) => {};
    (@remove opt $attr:ident) => {
        paste::paste! {
            #[doc = concat!("Removes the optional `", stringify!($attr), "` attribute.")]
            pub fn [<remove_ $attr>](&mut self) {
                self.0.remove_attr(stringify!($attr));
            }
        }
    };
}

/// Upstream MLIR requires a terminator at the end of every region of an op that is not known
/// to need none, and IRDL cannot declare that trait. CommIR regions therefore end with an
/// implicit terminator that only the generic form spells out, as `transform.yield` (an
/// upstream terminator with no payload semantics and no parent constraint).
pub const UPSTREAM_TERMINATOR: &str = "transform.yield";

commir_ops! {
    /// An N-D device mesh.
    MeshOp = "commir.mesh" {
        summary: "An N-D device mesh, levels ordered from slowest (inter-node) to fastest.",
        operands: [],
        results: [],
        attrs: { req sym_name: SymName, req shape: IntArray, opt names: AnyAttr, opt bandwidth: AnyAttr },
        regions: [],
        traits: [Trait::Symbol],
        format: "$sym_name `shape` $shape (`names` $names^)? (`bandwidth` $bandwidth^)? attr-dict",
        verify: verify_mesh,
    }
    /// A distributed operator.
    KernelOp = "commir.kernel" {
        summary: "A distributed operator: axes, buffers and a loop nest mapped onto a mesh.",
        operands: [],
        results: [],
        attrs: { req sym_name: SymName, req mesh: SymRef },
        regions: ["body"],
        traits: [Trait::Symbol, Trait::SymbolTable, Trait::IsolatedFromAbove, Trait::SingleBlock, Trait::NoRegionArguments, Trait::ImplicitTerminator(UPSTREAM_TERMINATOR)],
        format: "$sym_name `on` $mesh attr-dict-with-keyword $body",
        verify: verify_kernel,
    }
    /// A loop axis.
    AxisOp = "commir.axis" {
        summary: "A loop axis: extent, kind (spatial, reduction, managed) and minimum block.",
        operands: [],
        results: [],
        attrs: { req sym_name: SymName, req extent: Int, req kind: AxisKind, opt min_block: Int },
        regions: [],
        traits: [Trait::Symbol],
        format: "$sym_name `=` $extent $kind (`min` $min_block^)? attr-dict",
        verify: verify_in_kernel,
    }
    /// A tensor of the operator.
    BufferOp = "commir.buffer" {
        summary: "A tensor bound to axes per dimension, with a role and a sharding over the mesh.",
        operands: [],
        results: [],
        attrs: { req sym_name: SymName, req dims: Dims, req dtype: TypeAttr, req role: Role, opt sharding: Sharding },
        regions: [],
        traits: [Trait::Symbol],
        format: "$sym_name `:` $dims $dtype $role (`sharding` $sharding^)? attr-dict",
        verify: verify_in_kernel,
    }
    /// Run-time document boundaries of packed sequences.
    DocumentsOp = "commir.documents" {
        summary: "Run-time document boundaries (prefix sums, flash-attn's cu_seqlens) over a sequence of `positions` tokens: an input of every run, read by attention masks.",
        operands: [],
        results: [],
        attrs: { req sym_name: SymName, req positions: Int },
        regions: [],
        traits: [Trait::Symbol],
        format: "$sym_name `positions` $positions attr-dict",
        verify: verify_in_kernel,
    }
    /// A loop.
    ForOp = "commir.for" {
        summary: "A loop over an axis; optionally parallel over a mesh level or shifted by a parallel loop.",
        operands: [],
        results: [],
        attrs: { req axis: SymRef, opt parallel: Int, opt shift: SymRef },
        regions: ["body"],
        traits: [Trait::SingleBlock, Trait::NoRegionArguments, Trait::ImplicitTerminator(UPSTREAM_TERMINATOR)],
        format: "$axis (`parallel` `(` $parallel `)`)? (`shift` `(` $shift `)`)? attr-dict $body",
        verify: verify_in_kernel,
    }
    /// A read of a buffer tile.
    LoadOp = "commir.load" {
        summary: "Reads the tile of a buffer selected by the indices (whole range for unlooped axes).",
        operands: [],
        results: [ArgDef::one("tile")],
        attrs: { req buffer: SymRef, req indices: Indices },
        regions: [],
        traits: [Trait::Pure],
        format: "$buffer $indices attr-dict `:` type(results)",
        verify: verify_in_kernel,
    }
    /// A local library kernel.
    PatchOp = "commir.patch" {
        summary: "A local library kernel (gemm, attention) applied to tiles.",
        operands: [ArgDef::many("inputs")],
        results: [ArgDef::many("outputs")],
        attrs: { req kernel: Str },
        regions: [],
        traits: [Trait::Pure],
        format: "$kernel `(` $inputs `)` attr-dict `:` functional-type(operands, results)",
        verify: verify_in_kernel,
    }
    /// A batched matrix product of two tiles.
    MatmulOp = "commir.matmul" {
        summary: "A batched matrix product of two tiles over their last two dimensions (optionally transposed).",
        operands: [ArgDef::one("lhs"), ArgDef::one("rhs")],
        results: [ArgDef::one("result")],
        attrs: { opt transpose_a: Flag, opt transpose_b: Flag },
        regions: [],
        traits: [Trait::Pure],
        format: "$lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? attr-dict `:` functional-type(operands, results)",
        verify: verify_in_kernel,
    }
    /// An elementwise function of one tile.
    UnaryOp = "commir.unary" {
        summary: "An elementwise function of a tile: exp, log, gelu (tanh form), silu, rsqrt.",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: { req kind: UnaryAttr },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$kind $input attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// An elementwise function of two tiles.
    BinaryOp = "commir.binary" {
        summary: "An elementwise function of two tiles (add, sub, mul, div, max); a tile without the other's last dimension is broadcast along it, a tile of the other's last dimensions over its leading ones.",
        operands: [ArgDef::one("lhs"), ArgDef::one("rhs")],
        results: [ArgDef::one("result")],
        attrs: { req kind: BinaryAttr },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$kind $lhs `,` $rhs attr-dict `:` type($lhs)",
        verify: verify_in_kernel,
    }
    /// A tile times a constant.
    ScaleOp = "commir.scale" {
        summary: "Multiplies every element of a tile by a constant.",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: { req factor: Float },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$input `by` $factor attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// A tile plus a constant.
    AddScalarOp = "commir.add_scalar" {
        summary: "Adds a constant to every element of a tile (RMSNorm's epsilon).",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: { req value: Float },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$input `,` $value attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// The rotation of rotary position embeddings.
    RotateHalfOp = "commir.rotate_half" {
        summary: "Rotates the halves of each row of a tile: [-x2, x1] for a row [x1, x2] (rotary position embeddings).",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: {},
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$input attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// A conversion of a tile's element type.
    CastOp = "commir.cast" {
        summary: "Converts a tile to another element type (rounding to nearest even).",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: {},
        regions: [],
        traits: [Trait::Pure],
        format: "$input attr-dict `:` type($input) `to` type(results)",
        verify: verify_in_kernel,
    }
    /// A mask over the last two dimensions of a tile.
    MaskOp = "commir.mask" {
        summary: "Masks a tile of scores: causal sets key positions (last dimension) after the query position (second to last) to -inf.",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: { req kind: MaskKind },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$kind $input attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// A reduction of every row of a tile.
    RowReduceOp = "commir.row_reduce" {
        summary: "Reduces a tile along its last dimension (max, sum); the result has one value per row.",
        operands: [ArgDef::one("input")],
        results: [ArgDef::one("result")],
        attrs: { req kind: RowReduceAttr },
        regions: [],
        traits: [Trait::Pure, Trait::SameOperandsAndResultType],
        format: "$kind $input attr-dict `:` type($input)",
        verify: verify_in_kernel,
    }
    /// An accumulation into a buffer tile.
    ReduceOp = "commir.reduce" {
        summary: "Combines tiles into a buffer tile (add, or the softmax lse merge; its merged log-sum-exp kept in the buffer `lse` names; `carry`: a shifted sum's accumulator travels with the pieces, ring-flash-attn's dK/dV).",
        operands: [ArgDef::many("values")],
        results: [],
        attrs: { req kind: ReduceKind, req buffer: SymRef, req indices: Indices, opt lse: SymRef, opt carry: Flag },
        regions: [],
        traits: [],
        format: "$kind $values `into` $buffer $indices (`lse` $lse^)? (`carry` $carry^)? attr-dict `:` type($values)",
        verify: verify_in_kernel,
    }
    /// A write of a buffer tile.
    StoreOp = "commir.store" {
        summary: "Writes a tile into a buffer tile.",
        operands: [ArgDef::one("value")],
        results: [],
        attrs: { req buffer: SymRef, req indices: Indices },
        regions: [],
        traits: [],
        format: "$value `into` $buffer $indices attr-dict `:` type($value)",
        verify: verify_in_kernel,
    }
    /// A change of placement.
    ReshardOp = "commir.reshard" {
        summary: "Changes a buffer's placement at this point (an all-to-all or gather).",
        operands: [],
        results: [],
        attrs: { req buffer: SymRef, req sharding: Sharding },
        regions: [],
        traits: [],
        format: "$buffer `to` $sharding attr-dict",
        verify: verify_in_kernel,
    }
}

/// The CommIR dialect.
pub static COMMIR: Dialect = Dialect {
    name: "commir",
    summary: "Loop nests with distribution annotations: communication as a property of loop mapping and buffer placement.",
    ops: OPS,
};

/// The dialect's types, for the IRDL export: `!commir.tile<elem>`, a tile of a buffer.
pub static TYPES: &[mercury_ir::irdl::TypeDef] = &[mercury_ir::irdl::TypeDef {
    name: "tile",
    comment: "A tile of a buffer, with its element type: !commir.tile<bf16>.",
    params: &["elem"],
}];

/// Operand and result constraints of the IRDL export: every value is a tile.
pub const VALUE_TYPE: &str = "@commir::@tile";

fn verify_mesh(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    MeshOp(op).verify().map(|_| ())
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

/// Body ops are checked by their kernel's model (each by its view's `verify`, called in
/// program order); here only that they sit in a kernel.
fn verify_in_kernel(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    match ctx.parent() {
        Some(p)
            if p.name == KernelOp::<&Operation>::NAME || p.name == ForOp::<&Operation>::NAME =>
        {
            Ok(())
        }
        _ => Err(Diagnostic::error(
            op.loc.clone(),
            format!("'{}' must be inside a 'commir.kernel'", op.name),
        )),
    }
}

/// Whether `op` is a declaration of a kernel (axis, buffer, document boundaries): at the top
/// of the kernel, before its statements.
pub fn is_decl(op: &Operation) -> bool {
    AxisOp::cast(op).is_some() || BufferOp::cast(op).is_some() || DocumentsOp::cast(op).is_some()
}

impl<O: Deref<Target = Operation>> KernelOp<O> {
    /// The ops of the kernel body.
    pub fn ops(&self) -> &[Operation] {
        self.0.body(0)
    }
}

impl<O: DerefMut<Target = Operation>> KernelOp<O> {
    /// The ops of the kernel body, to rewrite.
    pub fn ops_mut(&mut self) -> &mut Vec<Operation> {
        self.0.body_mut(0)
    }
}

impl<O: Deref<Target = Operation>> ForOp<O> {
    /// The ops of the loop body.
    pub fn ops(&self) -> &[Operation] {
        self.0.body(0)
    }
}

impl<O: DerefMut<Target = Operation>> ForOp<O> {
    /// The ops of the loop body, to rewrite.
    pub fn ops_mut(&mut self) -> &mut Vec<Operation> {
        self.0.body_mut(0)
    }
}

/// An access op (load, reduce, store): the buffer it names and its index list.
pub enum AccessOp<O> {
    Load(LoadOp<O>),
    Reduce(ReduceOp<O>),
    Store(StoreOp<O>),
}

impl<O: Deref<Target = Operation>> AccessOp<O> {
    /// The view, if `op` is a load, a reduce or a store.
    pub fn cast(op: O) -> Option<Self> {
        match op.name.as_str() {
            "commir.load" => Some(AccessOp::Load(LoadOp(op))),
            "commir.reduce" => Some(AccessOp::Reduce(ReduceOp(op))),
            "commir.store" => Some(AccessOp::Store(StoreOp(op))),
            _ => None,
        }
    }
    fn inner(&self) -> &Operation {
        match self {
            AccessOp::Load(v) => &v.0,
            AccessOp::Reduce(v) => &v.0,
            AccessOp::Store(v) => &v.0,
        }
    }
    /// The buffer accessed.
    pub fn buffer(&self) -> Option<String> {
        self.inner()
            .attr("buffer")
            .and_then(|a| SymRef::read(a).ok())
    }
    /// The index list.
    pub fn indices(&self) -> Option<Vec<crate::IndexExpr>> {
        self.inner()
            .attr("indices")
            .and_then(|a| Indices::read(a).ok())
    }
}

impl<O: DerefMut<Target = Operation>> AccessOp<O> {
    /// Replaces the index list.
    pub fn set_indices(&mut self, ix: Vec<crate::IndexExpr>) {
        let a = Indices::write(&ix);
        match self {
            AccessOp::Load(v) => v.0.set_attr("indices", a),
            AccessOp::Reduce(v) => v.0.set_attr("indices", a),
            AccessOp::Store(v) => v.0.set_attr("indices", a),
        }
    }
}
