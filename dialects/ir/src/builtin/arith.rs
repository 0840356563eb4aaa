//! The `arith` dialect as upstream defines it: integer and float arithmetic (with overflow,
//! exact and fast-math flags), comparisons, casts, `select`, extended multiplication and
//! addition, and `constant` of every typed attribute, with their custom assembly and the
//! type constraints of their definitions (signless integers, float-like, bool-like, shapes).

use super::func::{attr_dict_text, optional_attr_dict};
use super::{elem_of_like, op_error};
use crate::attributes::Attribute;
use crate::diag::Diagnostic;
use crate::ir::{Operation, Value};
use crate::registry::{ArgDef, AttrDef, AttrKind, Dialect, OpAsm, OpDef, Trait, VerifyContext};
use crate::syntax::lexer::TokenKind as K;
use crate::syntax::parser::Parser;
use crate::syntax::printer::Printer;
use crate::types::{Signedness, Type};

const CMPI: [&str; 10] = [
    "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
];
const CMPF: [&str; 16] = [
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule",
    "une", "uno", "true",
];
const ROUNDING: [&str; 5] = [
    "to_nearest_even",
    "downward",
    "upward",
    "toward_zero",
    "to_nearest_away",
];
const FASTMATH: [&str; 9] = [
    "none", "reassoc", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "fast",
];
const OVERFLOW: [&str; 3] = ["none", "nsw", "nuw"];

const BINARY: &[ArgDef] = &[ArgDef::one("lhs"), ArgDef::one("rhs")];
const ONE: &[ArgDef] = &[ArgDef::one("result")];

const fn op(
    name: &'static str,
    summary: &'static str,
    operands: &'static [ArgDef],
    results: &'static [ArgDef],
) -> OpDef {
    OpDef {
        name,
        summary,
        operands,
        results,
        attrs: &[],
        regions: &[],
        traits: &[Trait::Pure],
        format: None,
        verify: Some(verify),
    }
}

const fn bin(name: &'static str, summary: &'static str) -> OpDef {
    op(name, summary, BINARY, ONE)
}

const IN: &[ArgDef] = &[ArgDef::one("in")];
const OUT: &[ArgDef] = &[ArgDef::one("out")];

const fn cast(name: &'static str, summary: &'static str) -> OpDef {
    op(name, summary, IN, OUT)
}

pub static ARITH: Dialect = Dialect {
    name: "arith",
    summary: "Integer and float arithmetic on scalars, vectors and tensors.",
    ops: &[
        OpDef {
            name: "arith.constant",
            summary: "A constant of a typed attribute's value.",
            operands: &[],
            results: ONE,
            attrs: &[AttrDef::req("value", AttrKind::Any)],
            regions: &[],
            traits: &[Trait::Pure],
            format: None,
            verify: Some(verify),
        },
        bin("arith.addi", "Integer addition."),
        bin("arith.subi", "Integer subtraction."),
        bin("arith.muli", "Integer multiplication."),
        bin("arith.shli", "Shift left."),
        bin("arith.divui", "Unsigned integer division."),
        bin("arith.divsi", "Signed integer division."),
        bin("arith.shrui", "Logical shift right."),
        bin("arith.shrsi", "Arithmetic shift right."),
        bin("arith.ceildivui", "Unsigned division rounding up."),
        bin("arith.ceildivsi", "Signed division rounding up."),
        bin("arith.floordivsi", "Signed division rounding down."),
        bin("arith.remui", "Unsigned remainder."),
        bin("arith.remsi", "Signed remainder."),
        bin("arith.andi", "Bitwise and."),
        bin("arith.ori", "Bitwise or."),
        bin("arith.xori", "Bitwise exclusive or."),
        bin("arith.maxsi", "Signed maximum."),
        bin("arith.maxui", "Unsigned maximum."),
        bin("arith.minsi", "Signed minimum."),
        bin("arith.minui", "Unsigned minimum."),
        bin("arith.addf", "Float addition."),
        bin("arith.subf", "Float subtraction."),
        bin("arith.mulf", "Float multiplication."),
        bin("arith.divf", "Float division."),
        bin("arith.remf", "Float remainder."),
        bin("arith.maximumf", "Float maximum (NaN propagating)."),
        bin("arith.maxnumf", "Float maximum (NaN ignoring)."),
        bin("arith.minimumf", "Float minimum (NaN propagating)."),
        bin("arith.minnumf", "Float minimum (NaN ignoring)."),
        op(
            "arith.negf",
            "Float negation.",
            &[ArgDef::one("operand")],
            ONE,
        ),
        op("arith.cmpi", "Integer comparison.", BINARY, ONE),
        op("arith.cmpf", "Float comparison.", BINARY, ONE),
        op(
            "arith.select",
            "Chooses between two values by a condition.",
            &[
                ArgDef::one("condition"),
                ArgDef::one("true_value"),
                ArgDef::one("false_value"),
            ],
            ONE,
        ),
        op(
            "arith.addui_extended",
            "Addition with overflow bit.",
            BINARY,
            &[ArgDef::one("sum"), ArgDef::one("overflow")],
        ),
        op(
            "arith.mulsi_extended",
            "Signed full-width product.",
            BINARY,
            &[ArgDef::one("low"), ArgDef::one("high")],
        ),
        op(
            "arith.mului_extended",
            "Unsigned full-width product.",
            BINARY,
            &[ArgDef::one("low"), ArgDef::one("high")],
        ),
        cast("arith.extui", "Zero extension."),
        cast("arith.extsi", "Sign extension."),
        cast("arith.extf", "Float extension."),
        cast("arith.trunci", "Integer truncation."),
        cast("arith.truncf", "Float truncation."),
        cast("arith.uitofp", "Unsigned integer to float."),
        cast("arith.sitofp", "Signed integer to float."),
        cast("arith.fptoui", "Float to unsigned integer."),
        cast("arith.fptosi", "Float to signed integer."),
        cast("arith.index_cast", "Between index and integer, signed."),
        cast("arith.index_castui", "Between index and integer, unsigned."),
        cast("arith.bitcast", "Reinterprets the bits."),
        op(
            "arith.scaling_extf",
            "Float extension with a scale.",
            &[ArgDef::one("in"), ArgDef::one("scale")],
            &[ArgDef::one("out")],
        ),
        op(
            "arith.scaling_truncf",
            "Float truncation with a scale.",
            &[ArgDef::one("in"), ArgDef::one("scale")],
            &[ArgDef::one("out")],
        ),
    ],
};

// ---- type constraints -------------------------------------------------------------------

fn signless_int(t: &Type) -> bool {
    t.is_signless_int()
}
fn int_or_index_like(t: &Type) -> bool {
    elem_of_like(t).is_some_and(|e| signless_int(e) || *e == Type::Index)
}
fn fixed_int_like(t: &Type) -> bool {
    elem_of_like(t).is_some_and(signless_int)
}
fn float_like(t: &Type) -> bool {
    elem_of_like(t).is_some_and(Type::is_builtin_float)
}
fn bool_like(t: &Type) -> bool {
    elem_of_like(t).is_some_and(|e| *e == Type::i(1))
}
/// The element type of a type (itself for a scalar), memrefs included.
fn elem(t: &Type) -> &Type {
    t.element_type().unwrap_or(t)
}
fn shape_of(t: &Type) -> Option<Option<Vec<Option<u64>>>> {
    match t {
        Type::Vector { .. } | Type::Tensor { .. } | Type::MemRef { .. } => Some(t.shape()),
        _ => None,
    }
}
/// The same type with another element type.
fn same_shape(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (
            Type::Vector {
                shape: s1,
                scalable: c1,
                ..
            },
            Type::Vector {
                shape: s2,
                scalable: c2,
                ..
            },
        ) => s1 == s2 && c1 == c2,
        (
            Type::Tensor {
                shape: s1,
                encoding: e1,
                ..
            },
            Type::Tensor {
                shape: s2,
                encoding: e2,
                ..
            },
        ) => s1 == s2 && e1 == e2,
        (Type::MemRef { shape: s1, .. }, Type::MemRef { shape: s2, .. }) => s1 == s2,
        (a, b) => shape_of(a).is_none() && shape_of(b).is_none(),
    }
}

fn must(
    op: &Operation,
    what: &str,
    i: usize,
    t: &Type,
    ok: bool,
    desc: &str,
) -> Result<(), Diagnostic> {
    if ok {
        return Ok(());
    }
    Err(op_error(
        op,
        format!("{what} #{i} must be {desc}, but got '{t}'"),
    ))
}

/// The flag attributes the custom forms spell (`fastmath<...>`, `overflow<...>`, `exact`, a
/// rounding mode) must be of their kind: one of another kind would print as nothing.
fn verify_flags(op: &Operation) -> Result<(), Diagnostic> {
    for (key, kind) in [("fastmath", "fastmath"), ("overflowFlags", "overflow")] {
        match op.attr(key) {
            None => {}
            Some(Attribute::Dialect {
                dialect,
                name,
                body: Some(_),
            }) if dialect == "arith" && name == kind => {}
            Some(a) => {
                return Err(op_error(op, format!("attribute '{key}' failed to satisfy constraint: '{a}' is not an #arith.{kind} attribute")));
            }
        }
    }
    if let Some(a) = op.attr("isExact") {
        if !matches!(a, Attribute::Unit) {
            return Err(op_error(
                op,
                "attribute 'isExact' failed to satisfy constraint: unit attribute",
            ));
        }
    }
    if let Some(a) = op.attr("roundingmode") {
        let ok = matches!(a, Attribute::Integer { value, ty } if *ty == Type::i(32) && (0..ROUNDING.len() as i64).contains(value));
        if !ok {
            return Err(op_error(op, "attribute 'roundingmode' failed to satisfy constraint: 32-bit signless integer attribute whose value is a rounding mode"));
        }
    }
    Ok(())
}

fn verify(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    verify_flags(op)?;
    let short = op.name.trim_start_matches("arith.");
    let ins: Vec<&Type> = op.operands.iter().map(|v| &v.ty).collect();
    let outs: Vec<&Type> = op.results.iter().map(|v| &v.ty).collect();
    let same_all = |op: &Operation| -> Result<(), Diagnostic> {
        let first = ins.first().or(outs.first());
        if let Some(f) = first {
            if ins.iter().chain(&outs).any(|t| t != f) {
                return Err(op_error(
                    op,
                    "requires the same type for all operands and results",
                ));
            }
        }
        Ok(())
    };
    match short {
        "constant" => return verify_constant(op),
        "addi" | "subi" | "muli" | "shli" | "divui" | "divsi" | "shrui" | "shrsi" | "ceildivui"
        | "ceildivsi" | "floordivsi" | "remui" | "remsi" | "andi" | "ori" | "xori" | "maxsi"
        | "maxui" | "minsi" | "minui" => {
            for (i, t) in ins.iter().enumerate() {
                must(
                    op,
                    "operand",
                    i,
                    t,
                    int_or_index_like(t),
                    "signless-integer-like",
                )?;
            }
            same_all(op)?;
        }
        "addf" | "subf" | "mulf" | "divf" | "remf" | "maximumf" | "maxnumf" | "minimumf"
        | "minnumf" | "negf" => {
            for (i, t) in ins.iter().enumerate() {
                must(op, "operand", i, t, float_like(t), "floating-point-like")?;
            }
            must(
                op,
                "result",
                0,
                outs[0],
                float_like(outs[0]),
                "floating-point-like",
            )?;
            same_all(op)?;
        }
        "cmpi" | "cmpf" => {
            let int = short == "cmpi";
            for (i, t) in ins.iter().enumerate() {
                if int {
                    must(
                        op,
                        "operand",
                        i,
                        t,
                        int_or_index_like(t),
                        "signless-integer-like",
                    )?;
                } else {
                    must(op, "operand", i, t, float_like(t), "floating-point-like")?;
                }
            }
            if ins[0] != ins[1] {
                return Err(op_error(op, "requires all operands to have the same type"));
            }
            must(op, "result", 0, outs[0], bool_like(outs[0]), "bool-like")?;
            if !same_shape(ins[0], outs[0]) {
                return Err(op_error(op, "failed to verify that result type has i1 element type and same shape as operands"));
            }
            let names: &[&str] = if int { &CMPI } else { &CMPF };
            match op.attr("predicate") {
                Some(Attribute::Integer { value, .. }) if (0..names.len() as i64).contains(value) => {}
                Some(_) => {
                    return Err(op_error(
                        op,
                        format!(
                            "attribute 'predicate' failed to satisfy constraint: allowed 64-bit signless integer cases: {}",
                            (0..names.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
                        ),
                    ))
                }
                None => return Err(op_error(op, "requires attribute 'predicate'")),
            }
        }
        "select" => {
            must(op, "operand", 0, ins[0], bool_like(ins[0]), "bool-like")?;
            if ins[1] != ins[2] || ins[1] != outs[0] {
                return Err(op_error(
                    op,
                    "failed to verify that all of {true_value, false_value, result} have same type",
                ));
            }
            if *ins[0] != Type::i(1) && !same_shape(ins[0], outs[0]) {
                if shape_of(outs[0]).is_none() {
                    return Err(op_error(
                        op,
                        "failed to verify that condition is signless i1 or has matching shape",
                    ));
                }
                return Err(op_error(
                    op,
                    "expected condition type to have the same shape as the result type",
                ));
            }
        }
        "addui_extended" | "mulsi_extended" | "mului_extended" => {
            for (i, t) in ins.iter().enumerate() {
                must(
                    op,
                    "operand",
                    i,
                    t,
                    int_or_index_like(t),
                    "signless-integer-like",
                )?;
            }
            if ins[0] != ins[1] || ins[0] != outs[0] {
                return Err(op_error(
                    op,
                    "requires the same type for all operands and results",
                ));
            }
            if short == "addui_extended" {
                must(op, "result", 1, outs[1], bool_like(outs[1]), "bool-like")?;
                if shape_of(outs[0]).is_some() != shape_of(outs[1]).is_some() {
                    return Err(op_error(
                        op,
                        "if an operand is non-scalar, then all results must be non-scalar",
                    ));
                }
                if !same_shape(outs[0], outs[1]) {
                    return Err(op_error(
                        op,
                        "all non-scalar operands/results must have the same shape and base type",
                    ));
                }
            } else if outs[1] != outs[0] {
                return Err(op_error(
                    op,
                    "requires the same type for all operands and results",
                ));
            }
        }
        _ => return verify_cast(op, short, ins[0], outs[0]),
    }
    Ok(())
}

fn verify_cast(op: &Operation, short: &str, from: &Type, to: &Type) -> Result<(), Diagnostic> {
    let (a, b) = (elem(from), elem(to));
    let mem = |t: &Type| matches!(t, Type::MemRef { .. });
    let int_like = |t: &Type| fixed_int_like(t);
    let flt_like = |t: &Type| float_like(t);
    let idx_like = |t: &Type| {
        int_or_index_like(t) || (mem(t) && (signless_int(elem(t)) || *elem(t) == Type::Index))
    };
    let (in_ok, in_desc, out_ok, out_desc) = match short {
        "extui" | "extsi" | "trunci" => (
            int_like(from),
            "signless-fixed-width-integer-like",
            int_like(to),
            "signless-fixed-width-integer-like",
        ),
        "extf" | "truncf" | "scaling_extf" | "scaling_truncf" => (
            flt_like(from),
            "floating-point-like",
            flt_like(to),
            "floating-point-like",
        ),
        "uitofp" | "sitofp" => (
            int_like(from),
            "signless-fixed-width-integer-like",
            flt_like(to),
            "floating-point-like",
        ),
        "fptoui" | "fptosi" => (
            flt_like(from),
            "floating-point-like",
            int_like(to),
            "signless-fixed-width-integer-like",
        ),
        "index_cast" | "index_castui" => (
            idx_like(from),
            "signless-integer-like or memref of signless-integer",
            idx_like(to),
            "signless-integer-like or memref of signless-integer",
        ),
        _ => {
            let ok = |t: &Type| {
                (fixed_int_like(t)
                    || float_like(t)
                    || (mem(t) && (signless_int(elem(t)) || elem(t).is_builtin_float())))
                    && *elem(t) != Type::Index
            };
            (
                ok(from),
                "signless-integer-or-float-like or memref of signless-integer or float",
                ok(to),
                "signless-integer-or-float-like or memref of signless-integer or float",
            )
        }
    };
    must(op, "operand", 0, from, in_ok, in_desc)?;
    must(op, "result", 0, to, out_ok, out_desc)?;
    if shape_of(from).is_some() != shape_of(to).is_some()
        || (shape_of(from).is_some() && std::mem::discriminant(from) != std::mem::discriminant(to))
    {
        return Err(op_error(
            op,
            "requires the same shape for all operands and results",
        ));
    }
    if shape_of(from).is_some() && from.shape() != to.shape() {
        return Err(op_error(
            op,
            "failed to verify that input and output have the same tensor dimensions",
        ));
    }
    if let (Type::Vector { scalable: s1, .. }, Type::Vector { scalable: s2, .. }) = (from, to) {
        if s1 != s2 {
            return Err(op_error(
                op,
                "requires the same shape for all operands and results",
            ));
        }
    }
    let (wa, wb) = (
        a.int_or_float_width().unwrap_or(64),
        b.int_or_float_width().unwrap_or(64),
    );
    let encodings_match = match (from, to) {
        (Type::Tensor { encoding: e1, .. }, Type::Tensor { encoding: e2, .. }) => e1 == e2,
        _ => true,
    };
    let compatible = encodings_match
        && match short {
            "extui" | "extsi" | "extf" => wb > wa,
            "trunci" | "truncf" => wb < wa,
            "index_cast" | "index_castui" => (*a == Type::Index) != (*b == Type::Index),
            "bitcast" => wa == wb,
            _ => true,
        };
    if !compatible {
        return Err(op_error(
            op,
            format!("operand type '{from}' and result type '{to}' are cast incompatible"),
        ));
    }
    Ok(())
}

fn verify_constant(op: &Operation) -> Result<(), Diagnostic> {
    let Some(value) = op.attr("value") else {
        return Err(op_error(op, "requires attribute 'value'"));
    };
    let Some(ty) = value.typed() else {
        return Err(op_error(
            op,
            "attribute 'value' failed to satisfy constraint: TypedAttr instance",
        ));
    };
    let result = &op.results[0].ty;
    if ty != result {
        return Err(op_error(
            op,
            "failed to verify that all of {value, result} have same type",
        ));
    }
    if let Type::Integer { signedness, .. } = result {
        if *signedness != Signedness::Signless {
            return Err(op_error(op, "integer return type must be signless"));
        }
    }
    if !(matches!(result, Type::Integer { .. } | Type::Index)
        || result.is_builtin_float()
        || result.is_shaped())
    {
        return Err(op_error(
            op,
            "value must be an integer, float, or elements attribute",
        ));
    }
    if let (Type::Vector { scalable, .. }, Attribute::Elements { text, .. }) = (result, value) {
        if scalable.iter().any(|s| *s) && text.trim_start_matches("dense<").starts_with('[') {
            return Err(op_error(op, "intializing scalable vectors with elements attribute is not supported unless it's a vector splat"));
        }
    }
    Ok(())
}

// ---- assembly ---------------------------------------------------------------------------

fn set_results(op: &mut Operation, types: Vec<Type>) {
    op.results = types.into_iter().map(|t| Value::new(t, None)).collect();
}

/// `keyword<flags>` (`fastmath<fast>`, `overflow<nsw, nuw>`): the flags as a dialect attribute.
fn flags(p: &mut Parser, name: &str, allowed: &[&str]) -> Result<Attribute, Diagnostic> {
    p.expect(K::Less, "'<'")?;
    let mut items = Vec::new();
    loop {
        if !p.is(K::BareIdent) || !allowed.contains(&p.tok_text()) {
            return Err(p.err(format!(
                "expected one of [{}] for {name} flags",
                allowed
                    .iter()
                    .map(|a| format!("'{a}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        items.push(p.bump().text(p.text).to_string());
        if !p.eat(K::Comma) {
            break;
        }
    }
    p.expect(K::Greater, "'>'")?;
    Ok(Attribute::Dialect {
        dialect: "arith".into(),
        name: name.into(),
        body: Some(items.join(", ")),
    })
}

/// The flag modifiers an op may carry after its operands.
fn modifiers(p: &mut Parser, op: &mut Operation) -> Result<(), Diagnostic> {
    loop {
        if p.is_word("fastmath") {
            p.bump();
            let a = flags(p, "fastmath", &FASTMATH)?;
            op.set_attr("fastmath", a);
        } else if p.is_word("overflow") {
            p.bump();
            let a = flags(p, "overflow", &OVERFLOW)?;
            op.set_attr("overflowFlags", a);
        } else if p.is_word("exact") {
            p.bump();
            op.set_attr("isExact", Attribute::Unit);
        } else if p.is(K::BareIdent) && ROUNDING.contains(&p.tok_text()) {
            let i = ROUNDING
                .iter()
                .position(|r| *r == p.tok_text())
                .unwrap_or(0);
            p.bump();
            op.set_attr(
                "roundingmode",
                Attribute::Integer {
                    value: i as i64,
                    ty: Type::i(32),
                },
            );
        } else {
            return Ok(());
        }
    }
}

fn print_modifiers(op: &Operation) -> String {
    let mut s = String::new();
    if let Some(Attribute::Integer { value, .. }) = op.attr("roundingmode") {
        if let Some(r) = ROUNDING.get(*value as usize) {
            s.push(' ');
            s.push_str(r);
        }
    }
    for (key, kw) in [("overflowFlags", "overflow"), ("fastmath", "fastmath")] {
        if let Some(Attribute::Dialect { body: Some(b), .. }) = op.attr(key) {
            if b != "none" {
                s.push_str(&format!(" {kw}<{b}>"));
            }
        }
    }
    if op.attr("isExact").is_some() {
        s.push_str(" exact");
    }
    s
}

/// Attributes the custom forms spell themselves.
const SPELLED: &[&str] = &[
    "fastmath",
    "overflowFlags",
    "isExact",
    "roundingmode",
    "predicate",
    "value",
];

fn operands(
    p: &mut Parser,
    n: usize,
) -> Result<Vec<crate::syntax::parser::OperandUse>, Diagnostic> {
    let mut uses = vec![p.operand_use()?];
    for _ in 1..n {
        p.expect(K::Comma, "','")?;
        uses.push(p.operand_use()?);
    }
    Ok(uses)
}

fn names(p: &mut Printer, op: &Operation) -> String {
    op.operands
        .iter()
        .map(|v| p.name_of(v))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) static BINARY_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let n = if op.name == "arith.negf" { 1 } else { 2 };
        let uses = operands(p, n)?;
        modifiers(p, op)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let ty = p.type_()?;
        op.operands = p.resolve_all(&uses, &vec![ty.clone(); n])?;
        set_results(op, vec![ty]);
        Ok(())
    },
    print: |op, p| {
        let ty = op
            .results
            .first()
            .map(|r| r.ty.to_string())
            .unwrap_or_default();
        format!(
            "{}{}{} : {ty}",
            names(p, op),
            print_modifiers(op),
            attr_dict_text(op, SPELLED, false)
        )
    },
};

pub(crate) static EXTENDED_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let uses = operands(p, 2)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let ty = p.type_()?;
        let second = if op.name == "arith.addui_extended" {
            p.expect(K::Comma, "','")?;
            p.type_()?
        } else {
            ty.clone()
        };
        op.operands = p.resolve_all(&uses, &[ty.clone(), ty.clone()])?;
        set_results(op, vec![ty, second]);
        Ok(())
    },
    print: |op, p| {
        let t0 = op
            .results
            .first()
            .map(|r| r.ty.to_string())
            .unwrap_or_default();
        let tys = if op.name == "arith.addui_extended" {
            format!(
                "{t0}, {}",
                op.results
                    .get(1)
                    .map(|r| r.ty.to_string())
                    .unwrap_or_default()
            )
        } else {
            t0
        };
        format!(
            "{}{} : {tys}",
            names(p, op),
            attr_dict_text(op, SPELLED, false)
        )
    },
};

pub(crate) static CAST_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let scaling = op.name.starts_with("arith.scaling");
        let uses = operands(p, if scaling { 2 } else { 1 })?;
        modifiers(p, op)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let mut tys = vec![p.type_()?];
        if scaling {
            p.expect(K::Comma, "','")?;
            tys.push(p.type_()?);
        }
        p.expect_word("to")?;
        let out = p.type_()?;
        op.operands = p.resolve_all(&uses, &tys)?;
        set_results(op, vec![out]);
        Ok(())
    },
    print: |op, p| {
        let tys: Vec<String> = op.operands.iter().map(|v| v.ty.to_string()).collect();
        let out = op
            .results
            .first()
            .map(|r| r.ty.to_string())
            .unwrap_or_default();
        format!(
            "{}{}{} : {} to {out}",
            names(p, op),
            print_modifiers(op),
            attr_dict_text(op, SPELLED, false),
            tys.join(", ")
        )
    },
};

pub(crate) static CMP_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let table: &[&str] = if op.name == "arith.cmpi" {
            &CMPI
        } else {
            &CMPF
        };
        let word = match p.tok.kind {
            K::BareIdent => p.tok_text().to_string(),
            K::String => {
                let t = p.tok;
                let s = p.string_value()?;
                p.reset_to(t.start);
                s
            }
            _ => return Err(p.err("expected string or keyword containing one of the following enum values for attribute 'predicate' [".to_string() + &table.join(", ") + "]")),
        };
        let Some(i) = table.iter().position(|w| *w == word) else {
            return Err(p.err_here(format!(
                "expected string or keyword containing one of the following enum values for attribute 'predicate' [{}]",
                table.join(", ")
            )));
        };
        p.bump();
        op.set_attr("predicate", Attribute::int(i as i64));
        p.expect(K::Comma, "','")?;
        let uses = operands(p, 2)?;
        modifiers(p, op)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let ty = p.type_()?;
        op.operands = p.resolve_all(&uses, &[ty.clone(), ty.clone()])?;
        set_results(op, vec![bool_like_of(&ty)]);
        Ok(())
    },
    print: |op, p| {
        let table: &[&str] = if op.name == "arith.cmpi" {
            &CMPI
        } else {
            &CMPF
        };
        let pred = op
            .attr("predicate")
            .and_then(Attribute::as_int)
            .and_then(|i| table.get(i as usize))
            .copied()
            .unwrap_or("eq");
        let ty = op
            .operands
            .first()
            .map(|v| v.ty.to_string())
            .unwrap_or_default();
        format!(
            "{pred}, {}{}{} : {ty}",
            names(p, op),
            print_modifiers(op),
            attr_dict_text(op, SPELLED, false)
        )
    },
};

/// `i1`, or the same shape of `i1`.
fn bool_like_of(t: &Type) -> Type {
    match t {
        Type::Vector {
            shape, scalable, ..
        } => Type::Vector {
            shape: shape.clone(),
            scalable: scalable.clone(),
            elem: Box::new(Type::i(1)),
        },
        Type::Tensor {
            shape, encoding, ..
        } => Type::Tensor {
            shape: shape.clone(),
            elem: Box::new(Type::i(1)),
            encoding: encoding.clone(),
        },
        _ => Type::i(1),
    }
}

pub(crate) static SELECT_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let uses = operands(p, 3)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let first = p.type_()?;
        let (cond, ty) = if p.eat(K::Comma) {
            (first, p.type_()?)
        } else {
            (Type::i(1), first)
        };
        op.operands = p.resolve_all(&uses, &[cond, ty.clone(), ty.clone()])?;
        set_results(op, vec![ty]);
        Ok(())
    },
    print: |op, p| {
        let cond = op
            .operands
            .first()
            .map(|v| v.ty.clone())
            .unwrap_or(Type::i(1));
        let ty = op
            .results
            .first()
            .map(|r| r.ty.to_string())
            .unwrap_or_default();
        let tys = if cond == Type::i(1) {
            ty
        } else {
            format!("{cond}, {ty}")
        };
        format!(
            "{}{} : {tys}",
            names(p, op),
            attr_dict_text(op, SPELLED, false)
        )
    },
};

pub(crate) static CONSTANT_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        optional_attr_dict(p, op)?;
        let value = p.attribute()?;
        let Some(ty) = value.typed().cloned() else {
            return Err(p.err("expected a typed attribute for 'arith.constant'"));
        };
        op.set_attr("value", value);
        set_results(op, vec![ty]);
        Ok(())
    },
    print: |op, _| {
        let v = op
            .attr("value")
            .map(ToString::to_string)
            .unwrap_or_default();
        let rest = attr_dict_text(op, SPELLED, false);
        if rest.is_empty() {
            v
        } else {
            format!("{} {v}", rest.trim_start())
        }
    },
};
