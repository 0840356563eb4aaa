//! CommIR attribute syntaxes. Each has a custom form (one bracketed group) and a generic form
//! built from builtin attributes, so upstream MLIR reads the generic form through IRDL.
//!
//! | attribute | custom form | generic form |
//! |---|---|---|
//! | buffer dims | `[@b, @hk * @g, @i, 128]` | `[[@b], [@hk, @g], [@i], 128]` |
//! | sharding | `[R, S(0), S(0, 1)]` | `[[], [0], [0, 1]]` |
//! | zigzag, striped levels | `S(zigzag(0), striped(1, 64))` | `[["zigzag", 0], ["striped", 1, 64]]` |
//! | index list | `[@b, (@j + @i) mod 8]` | `["b", "(j + i) mod 8"]` |

use crate::expr::IndexExpr;
use crate::model::{AxisKind, MaskKind, ReduceKind, Role};
use crate::placement::{Placement, Split};
use mercury_ir::syntax::format::{comma_items, comma_runs};
use mercury_ir::syntax::int_literal::{parse_int_as, IntLiteralError};
use mercury_ir::syntax::tokens::{Tok, TokKind};
use mercury_ir::{AttrKind, Attribute, CustomAttrSyntax, Type};
use std::collections::BTreeMap;

/// One dimension of a buffer: a product of loop axes (outermost first) or a fixed size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimBinding {
    Axes(Vec<String>),
    Fixed(u64),
}

fn group<'a>(tok: &'a Tok, what: &str) -> Result<&'a [Tok], String> {
    match &tok.kind {
        TokKind::Group('[', inner) => Ok(inner),
        _ => Err(format!("expected '[' {what} ']', found {}", tok.describe())),
    }
}

// ---- dims ----------------------------------------------------------------------------------

pub fn dims_from_attr(a: &Attribute) -> Result<Vec<DimBinding>, String> {
    let items = a.as_array().ok_or("buffer dims must be an array")?;
    items
        .iter()
        .map(|d| match d {
            Attribute::Integer { value, .. } if *value > 0 => Ok(DimBinding::Fixed(*value as u64)),
            Attribute::Integer { value, .. } => {
                Err(format!("fixed dimension size {value} must be positive"))
            }
            Attribute::Array(axes) if !axes.is_empty() => axes
                .iter()
                .map(|x| {
                    x.as_symbol()
                        .map(String::from)
                        .ok_or_else(|| format!("dimension entry '{x}' is not an axis symbol"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(DimBinding::Axes),
            other => Err(format!(
                "dimension '{other}' must be an integer or a non-empty array of axis symbols"
            )),
        })
        .collect()
}

pub fn dims_to_attr(dims: &[DimBinding]) -> Attribute {
    Attribute::Array(
        dims.iter()
            .map(|d| match d {
                DimBinding::Fixed(n) => Attribute::int(*n as i64),
                DimBinding::Axes(a) => Attribute::Array(a.iter().map(Attribute::sym).collect()),
            })
            .collect(),
    )
}

fn parse_dims(tok: &Tok) -> Result<Attribute, String> {
    let mut dims = Vec::new();
    for run in comma_runs(group(tok, "dimensions")?) {
        match run {
            [Tok {
                kind: TokKind::Number(n),
                ..
            }] => {
                // The attribute holds an i64 (`dims_to_attr`): a size past it is too large,
                // not wrapped to a negative one.
                let v: i64 = parse_int_as(n).map_err(|e| {
                    if e == IntLiteralError::TooLarge {
                        format!(
                            "'{n}' is too large for a dimension size (at most {})",
                            i64::MAX
                        )
                    } else {
                        format!("'{n}' is not a dimension size")
                    }
                })?;
                match u64::try_from(v) {
                    Ok(0) => return Err("a fixed dimension size must be positive".into()),
                    Ok(v) => dims.push(DimBinding::Fixed(v)),
                    Err(_) => return Err(format!("'{n}' is not a dimension size")),
                }
            }
            _ => {
                let mut axes = Vec::new();
                for (i, t) in run.iter().enumerate() {
                    match (&t.kind, i % 2) {
                        (TokKind::Symbol(p), 0) if p.len() == 1 => axes.push(p[0].clone()),
                        (TokKind::Punct(s), 1) if s == "*" => {}
                        _ => {
                            return Err(format!(
                                "expected an axis '@a', a product '@a * @b' or a size, found {}",
                                t.describe()
                            ))
                        }
                    }
                }
                if axes.is_empty() || run.len() % 2 == 0 {
                    return Err("incomplete dimension".into());
                }
                dims.push(DimBinding::Axes(axes));
            }
        }
    }
    Ok(dims_to_attr(&dims))
}

/// Buffer dimensions in the custom form: `[@b, @hk * @g, 128]`.
pub(crate) fn dims_to_custom(dims: &[DimBinding]) -> String {
    print_dims(&dims_to_attr(dims))
}

fn print_dims(a: &Attribute) -> String {
    match dims_from_attr(a) {
        Ok(dims) => {
            let parts: Vec<String> = dims
                .iter()
                .map(|d| match d {
                    DimBinding::Fixed(n) => n.to_string(),
                    DimBinding::Axes(ax) => ax
                        .iter()
                        .map(|x| crate::expr::axis_ref(x))
                        .collect::<Vec<_>>()
                        .join(" * "),
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
        Err(_) => a.to_string(),
    }
}

pub static DIMS: CustomAttrSyntax = CustomAttrSyntax {
    name: "buffer dimensions",
    parse: parse_dims,
    print: print_dims,
    check: |a| dims_from_attr(a).map(|_| ()),
    irdl_base: ARRAY,
    irdl_var: "arr",
};

/// Every CommIR attribute syntax is a builtin array in generic form.
const ARRAY: &str = "irdl.base \"#builtin.array\"";

// ---- sharding ------------------------------------------------------------------------------

/// One mesh level of a dimension's sharding in generic form: `0` (block), `["zigzag", 0]` or
/// `["striped", 0, 64]`.
fn level_from_attr(x: &Attribute) -> Result<(usize, Split), String> {
    let level = |v: i64| {
        usize::try_from(v)
            .map_err(|_| format!("mesh level {v} does not exist (levels are numbered from 0)"))
    };
    if let Some(v) = x.as_int() {
        return Ok((level(v)?, Split::Block));
    }
    let items = x.as_array().ok_or_else(|| {
        format!("sharding level '{x}' must be a mesh dimension or [\"zigzag\", level(, chunk)] / [\"striped\", level, block]")
    })?;
    match items {
        [k, l] if k.as_str() == Some("zigzag") => {
            let l = l.as_int().ok_or_else(|| format!("'{l}' is not a mesh dimension"))?;
            Ok((level(l)?, Split::Zigzag))
        }
        [k, l, c] if k.as_str() == Some("zigzag") => {
            let l = l.as_int().ok_or_else(|| format!("'{l}' is not a mesh dimension"))?;
            match c.as_int() {
                Some(c) if c > 0 => Ok((level(l)?, Split::ZigzagChunks(c as usize))),
                _ => Err(format!("the zigzag chunk '{c}' must be a positive integer")),
            }
        }
        [k, l, b] if k.as_str() == Some("striped") => {
            let l = l.as_int().ok_or_else(|| format!("'{l}' is not a mesh dimension"))?;
            match b.as_int() {
                Some(b) if b > 0 => Ok((level(l)?, Split::Striped(b as usize))),
                _ => Err(format!("the striped block '{b}' must be a positive integer")),
            }
        }
        _ => Err(format!(
            "sharding level '{x}' must be a mesh dimension or [\"zigzag\", level(, chunk)] / [\"striped\", level, block]"
        )),
    }
}

/// Records level `l`'s split; a level named again with another split is an error (one
/// placement per level; a level named twice is the verifier's to report).
fn add_split(splits: &mut BTreeMap<usize, Split>, l: usize, s: Split) -> Result<(), String> {
    match splits.insert(l, s) {
        Some(prev) if prev != s => Err(format!(
            "mesh dimension {l} has two placements, {} and {} (one placement per level)",
            prev.keyword(),
            s.keyword()
        )),
        _ => Ok(()),
    }
}

/// Reads a placement: per dimension the mesh levels it is split over (empty = replicated),
/// each with its split. A level named twice with different splits is an error (one placement
/// per level); repeated levels are the verifier's to report.
pub fn sharding_from_attr(a: &Attribute) -> Result<Placement, String> {
    let items = a.as_array().ok_or("sharding must be an array")?;
    let mut levels = Vec::new();
    let mut splits = BTreeMap::new();
    for d in items {
        let v = d
            .as_array()
            .ok_or_else(|| format!("sharding entry '{d}' must be an array of mesh dimensions"))?;
        let mut ls = Vec::new();
        for x in v {
            let (l, s) = level_from_attr(x)?;
            add_split(&mut splits, l, s)?;
            ls.push(l);
        }
        levels.push(ls);
    }
    Ok(Placement::new(levels, splits))
}

/// The generic form of a placement (`[[], [0], [["zigzag", 1]]]`).
pub fn sharding_to_attr(p: &Placement) -> Attribute {
    Attribute::Array(
        (0..p.levels.len())
            .map(|d| {
                Attribute::Array(
                    p.dim(d)
                        .into_iter()
                        .map(|(l, s)| match s {
                            Split::Block => Attribute::int(l as i64),
                            Split::Zigzag => Attribute::Array(vec![
                                Attribute::str("zigzag"),
                                Attribute::int(l as i64),
                            ]),
                            Split::Striped(b) => Attribute::Array(vec![
                                Attribute::str("striped"),
                                Attribute::int(l as i64),
                                Attribute::int(b as i64),
                            ]),
                            Split::ZigzagChunks(c) => Attribute::Array(vec![
                                Attribute::str("zigzag"),
                                Attribute::int(l as i64),
                                Attribute::int(c as i64),
                            ]),
                        })
                        .collect(),
                )
            })
            .collect(),
    )
}

/// One level inside `S(...)`: `0`, `zigzag(0)`, `zigzag(0, 512)` or `striped(0, 64)`.
fn parse_level(run: &[Tok]) -> Result<(usize, Split), String> {
    let number = |t: &Tok| match &t.kind {
        TokKind::Number(n) => parse_int_as::<usize>(n)
            .ok()
            .filter(|l| i64::try_from(*l).is_ok())
            .ok_or_else(|| {
                if n.starts_with('-') {
                    format!("mesh level {n} does not exist (levels are numbered from 0)")
                } else {
                    format!("mesh level {n} does not exist (no mesh has that many levels)")
                }
            }),
        _ => Err(format!("expected a mesh dimension, found {}", t.describe())),
    };
    match run {
        [t] => Ok((number(t)?, Split::Block)),
        [w, Tok {
            kind: TokKind::Group('(', inner),
            ..
        }] => {
            let args = comma_items(inner)?;
            // Held as an i64 (`sharding_to_attr`): at most i64::MAX, not wrapped.
            let size = |b: &Tok, what: &str| {
                match &b.kind {
                    TokKind::Number(n) => parse_int_as::<i64>(n)
                        .ok()
                        .filter(|b| *b > 0)
                        .and_then(|b| usize::try_from(b).ok()),
                    _ => None,
                }
                .ok_or_else(|| format!("the {what} must be a positive integer, found {}", b.describe()))
            };
            match (w.word(), args.as_slice()) {
                (Some("zigzag"), [l]) => Ok((number(l)?, Split::Zigzag)),
                (Some("zigzag"), [l, c]) => Ok((
                    number(l)?,
                    Split::ZigzagChunks(size(c, "zigzag chunk")?),
                )),
                (Some("striped"), [l, b]) => {
                    Ok((number(l)?, Split::Striped(size(b, "striped block")?)))
                }
                (Some("zigzag"), _) => Err(
                    "zigzag takes a mesh dimension and optionally a chunk: zigzag(0) or zigzag(0, 512)"
                        .into(),
                ),
                (Some("striped"), _) => {
                    Err("striped takes a mesh dimension and a block: striped(0, 64)".into())
                }
                _ => Err(format!(
                    "expected a mesh dimension, zigzag(level), zigzag(level, chunk) or striped(level, block), found {}",
                    w.describe()
                )),
            }
        }
        // `S(0|1)` or `S(0 1)`: a level followed by something other than ','.
        [t, next, ..] if matches!(t.kind, TokKind::Number(_)) => Err(format!(
            "expected ',' between the mesh dimensions of S(...) (as in S(0, 1)), found {} after {}",
            next.describe(),
            t.describe()
        )),
        [t, ..] => Err(format!(
            "expected a mesh dimension, zigzag(level), zigzag(level, chunk) or striped(level, block), found {}",
            t.describe()
        )),
        [] => Err("expected a mesh dimension".into()),
    }
}

fn parse_sharding(tok: &Tok) -> Result<Attribute, String> {
    let mut levels = Vec::new();
    let mut splits = BTreeMap::new();
    for run in comma_runs(group(tok, "sharding")?) {
        match run {
            [t] if t.word() == Some("R") => levels.push(vec![]),
            [s, Tok {
                kind: TokKind::Group('(', inner),
                ..
            }] if s.word() == Some("S") => {
                let mut ls = Vec::new();
                for item in comma_runs(inner) {
                    let (l, sp) = parse_level(item)?;
                    add_split(&mut splits, l, sp)?;
                    ls.push(l);
                }
                if ls.is_empty() {
                    return Err("S() needs at least one mesh dimension".into());
                }
                levels.push(ls);
            }
            _ => {
                return Err(
                    "each dimension's sharding is 'R' (replicated) or 'S(mesh dims...)'".into(),
                )
            }
        }
    }
    Ok(sharding_to_attr(&Placement::new(levels, splits)))
}

pub static SHARDING: CustomAttrSyntax = CustomAttrSyntax {
    name: "sharding",
    parse: parse_sharding,
    print: |a| sharding_from_attr(a).map_or_else(|_| a.to_string(), |p| p.to_custom()),
    check: |a| sharding_from_attr(a).map(|_| ()),
    irdl_base: ARRAY,
    irdl_var: "arr",
};

// ---- index lists ---------------------------------------------------------------------------

pub fn indices_from_attr(a: &Attribute) -> Result<Vec<IndexExpr>, String> {
    let items = a.as_array().ok_or("indices must be an array")?;
    items
        .iter()
        .map(|x| {
            x.as_str()
                .ok_or_else(|| format!("index '{x}' must be a string"))
                .and_then(IndexExpr::parse_text)
        })
        .collect()
}

pub fn indices_to_attr(ix: &[IndexExpr]) -> Attribute {
    Attribute::Array(
        ix.iter()
            .map(|e| Attribute::String(e.to_string()))
            .collect(),
    )
}

fn parse_indices(tok: &Tok) -> Result<Attribute, String> {
    let exprs = comma_runs(group(tok, "indices")?)
        .into_iter()
        .map(IndexExpr::parse_tokens)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(indices_to_attr(&exprs))
}

pub static INDICES: CustomAttrSyntax = CustomAttrSyntax {
    name: "index list",
    parse: parse_indices,
    print: |a| match indices_from_attr(a) {
        Ok(ix) => format!(
            "[{}]",
            ix.iter()
                .map(IndexExpr::to_custom)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(_) => a.to_string(),
    },
    check: |a| indices_from_attr(a).map(|_| ()),
    irdl_base: ARRAY,
    irdl_var: "arr",
};

// ---- typed attribute values ----------------------------------------------------------------

/// The Rust face of one attribute kind: how an op declaration (`ops.rs`) spells the kind of an
/// attribute, and how its typed accessors read and write the value.
pub trait AttrValue {
    /// What the accessors return and take.
    type Value;
    /// The kind the structural verifier and the assembly format see.
    const KIND: AttrKind;
    /// Reads the value; `Err` says why the attribute is malformed.
    fn read(a: &Attribute) -> Result<Self::Value, String>;
    /// The attribute that stores `v`.
    fn write(v: &Self::Value) -> Attribute;
}

/// A defining symbol name (`sym_name`), printed `@name`.
pub struct SymName;
/// A flat symbol reference `@name`; the value is the leaf name.
pub struct SymRef;
/// A signless integer.
pub struct Int;
/// An array of integers.
pub struct IntArray;
/// A string.
pub struct Str;
/// A type (an element type).
pub struct TypeAttr;
/// Any attribute, kept as it is (checked by the op's own verifier).
pub struct AnyAttr;
/// Buffer dimensions bound to axes ([`DIMS`]).
pub struct Dims;
/// A placement: per dimension the mesh levels it is split over and how ([`SHARDING`]).
pub struct Sharding;
/// An index list of an access ([`INDICES`]).
pub struct Indices;
/// A flag: present (a unit attribute, a keyword in the custom form) or absent.
pub struct Flag;
/// A floating-point number.
pub struct Float;
/// An elementwise function of one tile (`exp`, `log`, `gelu`, `silu`).
pub struct UnaryAttr;
/// An elementwise function of two tiles (`add`, `sub`, `mul`, `div`, `max`).
pub struct BinaryAttr;
/// A reduction along rows (`max`, `sum`).
pub struct RowReduceAttr;

fn wrong(a: &Attribute, what: &str) -> String {
    format!("'{a}' is not {what}")
}

impl AttrValue for SymName {
    type Value = String;
    const KIND: AttrKind = AttrKind::SymbolName;
    fn read(a: &Attribute) -> Result<String, String> {
        a.as_str()
            .map(String::from)
            .ok_or_else(|| wrong(a, "a name"))
    }
    fn write(v: &String) -> Attribute {
        Attribute::str(v.as_str())
    }
}

impl AttrValue for SymRef {
    type Value = String;
    const KIND: AttrKind = AttrKind::SymbolRef;
    fn read(a: &Attribute) -> Result<String, String> {
        a.as_symbol()
            .map(String::from)
            .ok_or_else(|| wrong(a, "a symbol reference"))
    }
    fn write(v: &String) -> Attribute {
        Attribute::sym(v.as_str())
    }
}

impl AttrValue for Int {
    type Value = i64;
    const KIND: AttrKind = AttrKind::Int;
    /// An i64 (MLIR's default integer type, which the custom forms print without a type).
    fn read(a: &Attribute) -> Result<i64, String> {
        match a {
            Attribute::Integer { value, ty } if *ty == mercury_ir::Type::i(64) => Ok(*value),
            _ => Err(wrong(a, "an integer of type i64")),
        }
    }
    fn write(v: &i64) -> Attribute {
        Attribute::int(*v)
    }
}

impl AttrValue for IntArray {
    type Value = Vec<i64>;
    const KIND: AttrKind = AttrKind::IntArray;
    fn read(a: &Attribute) -> Result<Vec<i64>, String> {
        a.as_array()
            .and_then(|v| v.iter().map(|x| Int::read(x).ok()).collect())
            .ok_or_else(|| wrong(a, "an array of i64 integers"))
    }
    fn write(v: &Vec<i64>) -> Attribute {
        Attribute::Array(v.iter().map(|x| Attribute::int(*x)).collect())
    }
}

impl AttrValue for Str {
    type Value = String;
    const KIND: AttrKind = AttrKind::String;
    fn read(a: &Attribute) -> Result<String, String> {
        a.as_str()
            .map(String::from)
            .ok_or_else(|| wrong(a, "a string"))
    }
    fn write(v: &String) -> Attribute {
        Attribute::str(v.as_str())
    }
}

impl AttrValue for TypeAttr {
    type Value = Type;
    const KIND: AttrKind = AttrKind::Type;
    fn read(a: &Attribute) -> Result<Type, String> {
        a.as_type().cloned().ok_or_else(|| wrong(a, "a type"))
    }
    fn write(v: &Type) -> Attribute {
        Attribute::Type(v.clone())
    }
}

impl AttrValue for AnyAttr {
    type Value = Attribute;
    const KIND: AttrKind = AttrKind::Any;
    fn read(a: &Attribute) -> Result<Attribute, String> {
        Ok(a.clone())
    }
    fn write(v: &Attribute) -> Attribute {
        v.clone()
    }
}

impl AttrValue for Dims {
    type Value = Vec<DimBinding>;
    const KIND: AttrKind = AttrKind::Custom(&DIMS);
    fn read(a: &Attribute) -> Result<Vec<DimBinding>, String> {
        dims_from_attr(a)
    }
    fn write(v: &Vec<DimBinding>) -> Attribute {
        dims_to_attr(v)
    }
}

impl AttrValue for Sharding {
    type Value = Placement;
    const KIND: AttrKind = AttrKind::Custom(&SHARDING);
    fn read(a: &Attribute) -> Result<Placement, String> {
        sharding_from_attr(a)
    }
    fn write(v: &Placement) -> Attribute {
        sharding_to_attr(v)
    }
}

impl AttrValue for Indices {
    type Value = Vec<IndexExpr>;
    const KIND: AttrKind = AttrKind::Custom(&INDICES);
    fn read(a: &Attribute) -> Result<Vec<IndexExpr>, String> {
        indices_from_attr(a)
    }
    fn write(v: &Vec<IndexExpr>) -> Attribute {
        indices_to_attr(v)
    }
}

impl AttrValue for Flag {
    type Value = bool;
    const KIND: AttrKind = AttrKind::Unit;
    fn read(a: &Attribute) -> Result<bool, String> {
        match a {
            Attribute::Unit => Ok(true),
            _ => Err(wrong(a, "a unit attribute")),
        }
    }
    fn write(_: &bool) -> Attribute {
        Attribute::Unit
    }
}

impl AttrValue for Float {
    type Value = f64;
    const KIND: AttrKind = AttrKind::Float;
    fn read(a: &Attribute) -> Result<f64, String> {
        a.as_float().ok_or_else(|| wrong(a, "a number"))
    }
    fn write(v: &f64) -> Attribute {
        Attribute::Float {
            value: *v,
            ty: Type::F64,
        }
    }
}

/// The attribute value of a keyword enum (`KEYWORDS`, `keyword`, `from_keyword`: the
/// `mercury_plan::keywords!` macro), read through `$marker` (the enum itself, or a marker type
/// for an enum of another crate).
macro_rules! keyword_value {
    ($marker:ident => $ty:ty) => {
        impl AttrValue for $marker {
            type Value = $ty;
            const KIND: AttrKind = AttrKind::Keyword(<$ty>::KEYWORDS);
            fn read(a: &Attribute) -> Result<$ty, String> {
                a.as_str()
                    .and_then(<$ty>::from_keyword)
                    .ok_or_else(|| format!("{:?}", a.as_str()))
            }
            fn write(v: &$ty) -> Attribute {
                Attribute::str(v.keyword())
            }
        }
    };
}

keyword_value!(UnaryAttr => mercury_plan::tile::UnaryFn);
keyword_value!(BinaryAttr => mercury_plan::tile::BinaryFn);
keyword_value!(RowReduceAttr => mercury_plan::tile::RowReduceKind);

/// An attribute whose value is one keyword of a fixed set, read as a Rust enum (the set is
/// the enum's, so the verifier's list and the enum cannot drift apart).
macro_rules! keyword_attr {
    ($ty:ident { $($variant:ident = $kw:literal),+ $(,)? }) => {
        mercury_plan::keywords!($ty { $($variant = $kw),+ });
        keyword_value!($ty => $ty);
    };
}

keyword_attr!(AxisKind {
    Spatial = "spatial",
    Reduction = "reduction",
    Managed = "managed",
});
keyword_attr!(Role {
    In = "in",
    Out = "out",
    InOut = "inout",
    Temp = "temp",
});
keyword_attr!(ReduceKind {
    Add = "add",
    LseMerge = "lse_merge",
});
keyword_attr!(MaskKind {
    Causal = "causal",
});
