//! The `func` dialect as upstream defines it: `func.func` (a symbol with a signature, argument
//! and result attributes, visibility, and `func` as the default dialect of its body),
//! `func.return`, `func.call`, `func.call_indirect` and `func.constant`.

use super::op_error;
use crate::attributes::{symbol_name, write_dict, Attribute};
use crate::diag::Diagnostic;
use crate::ir::{AttrDict, Operation, Value};
use crate::registry::{ArgDef, AttrDef, AttrKind, Dialect, OpAsm, OpDef, Trait, VerifyContext};
use crate::syntax::lexer::TokenKind as K;
use crate::syntax::parser::{Parser, RegionArg};
use crate::syntax::printer::Printer;
use crate::types::Type;

pub static FUNC: Dialect = Dialect {
    name: "func",
    summary: "Functions: definitions, calls and returns.",
    ops: &[
        OpDef {
            name: "func.func",
            summary: "A function: a symbol with a signature and a body (none for a declaration).",
            operands: &[],
            results: &[],
            attrs: &[
                AttrDef::req("sym_name", AttrKind::String),
                AttrDef::req("function_type", AttrKind::Type),
                AttrDef::opt("sym_visibility", AttrKind::String),
                AttrDef::opt("arg_attrs", AttrKind::Any),
                AttrDef::opt("res_attrs", AttrKind::Any),
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
            traits: &[Trait::Terminator, Trait::Pure],
            format: None,
            verify: Some(verify_return),
        },
        OpDef {
            name: "func.call",
            summary: "Calls a function by symbol.",
            operands: &[ArgDef::many("operands")],
            results: &[ArgDef::many("results")],
            attrs: &[AttrDef::req("callee", AttrKind::SymbolRef)],
            regions: &[],
            traits: &[],
            format: None,
            verify: Some(verify_call),
        },
        OpDef {
            name: "func.call_indirect",
            summary: "Calls a function value.",
            operands: &[ArgDef::one("callee"), ArgDef::many("callee_operands")],
            results: &[ArgDef::many("results")],
            attrs: &[],
            regions: &[],
            traits: &[],
            format: None,
            verify: Some(verify_call_indirect),
        },
        OpDef {
            name: "func.constant",
            summary: "A function value from a symbol.",
            operands: &[],
            results: &[ArgDef::one("result")],
            attrs: &[AttrDef::req("value", AttrKind::SymbolRef)],
            regions: &[],
            traits: &[Trait::Pure],
            format: None,
            verify: Some(verify_constant),
        },
    ],
};

fn fn_type(op: &Operation) -> Option<(&[Type], &[Type])> {
    match op.attr("function_type").and_then(Attribute::as_type) {
        Some(Type::Function { inputs, results }) => Some((inputs, results)),
        _ => None,
    }
}

fn verify_func(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let Some((inputs, results)) = fn_type(op) else {
        return Err(op_error(
            op,
            "requires attribute 'function_type' to be a function type",
        ));
    };
    let body = op.regions.first().filter(|r| !r.blocks.is_empty());
    match body {
        None => {
            let vis = op.attr("sym_visibility").and_then(Attribute::as_str);
            if vis.is_none() || vis == Some("public") {
                return Err(op_error(
                    op,
                    "symbol declaration cannot have public visibility",
                ));
            }
        }
        Some(r) => {
            let entry = &r.blocks[0];
            if entry.args.len() != inputs.len() {
                return Err(op_error(
                    op,
                    format!(
                        "entry block must have {} arguments to match function signature",
                        inputs.len()
                    ),
                ));
            }
            for (i, (a, t)) in entry.args.iter().zip(inputs).enumerate() {
                if &a.ty != t {
                    return Err(op_error(
                        op,
                        format!(
                            "type of entry block argument #{i}('{}') must match the type of the corresponding argument in function signature('{t}')",
                            a.ty
                        ),
                    ));
                }
            }
        }
    }
    if let Some(v) = op.attr("sym_visibility") {
        if !matches!(v.as_str(), Some("public" | "private" | "nested")) {
            return Err(op_error(
                op,
                "visibility expected to be one of [\"public\", \"private\", \"nested\"], but got "
                    .to_string()
                    + &v.to_string(),
            ));
        }
    }
    for (key, n, what, plural) in [
        ("arg_attrs", inputs.len(), "argument", "arguments"),
        ("res_attrs", results.len(), "result", "results"),
    ] {
        if let Some(a) = op.attr(key) {
            let Some(items) = a.as_array() else {
                return Err(op_error(
                    op,
                    format!("expects {what} attribute array to be an ArrayAttr"),
                ));
            };
            if items.len() != n {
                return Err(op_error(
                    op,
                    format!(
                        "expects {what} attribute array to have the same number of elements as the number of function {what}s, got {}, but expected {n}",
                        items.len()
                    ),
                ));
            }
            if items.iter().any(|d| !matches!(d, Attribute::Dict(_))) {
                return Err(op_error(
                    op,
                    format!("expects {what} attribute dictionary to be a DictionaryAttr"),
                ));
            }
            let plain = items.iter().any(|d| match d {
                Attribute::Dict(d) => d.keys().any(|k| !k.contains('.')),
                _ => false,
            });
            if plain {
                return Err(op_error(
                    op,
                    format!("{plural} may only have dialect attributes"),
                ));
            }
        }
    }
    Ok(())
}

fn verify_return(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(parent) = ctx.parent() else {
        return Ok(());
    };
    if parent.name != "func.func" {
        return Err(op_error(op, "expects parent op 'func.func'"));
    }
    let name = parent.symbol_name().unwrap_or("");
    if let Some((_, results)) = fn_type(parent) {
        if op.operands.len() != results.len() {
            return Err(op_error(
                op,
                format!(
                    "has {} operands, but enclosing function (@{name}) returns {}",
                    op.operands.len(),
                    results.len()
                ),
            ));
        }
        for (i, (v, t)) in op.operands.iter().zip(results).enumerate() {
            if &v.ty != t {
                return Err(Diagnostic::error(
                    op.loc.clone(),
                    format!(
                        "type of return operand {i} ('{}') doesn't match function result type ('{t}') in function @{name}",
                        v.ty
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_call_types(
    op: &Operation,
    args: &[Value],
    inputs: &[Type],
    results: &[Type],
) -> Result<(), Diagnostic> {
    if args.len() != inputs.len() {
        return Err(op_error(op, "incorrect number of operands for callee"));
    }
    for (i, (v, t)) in args.iter().zip(inputs).enumerate() {
        if &v.ty != t {
            return Err(op_error(
                op,
                format!(
                    "operand type mismatch: expected operand type '{t}', but provided '{}' for operand number {i}",
                    v.ty
                ),
            ));
        }
    }
    if op.results.len() != results.len() {
        return Err(op_error(op, "incorrect number of results for callee"));
    }
    for (i, (v, t)) in op.results.iter().zip(results).enumerate() {
        if &v.ty != t {
            return Err(op_error(op, format!("result type mismatch at index {i}")));
        }
    }
    Ok(())
}

fn verify_call(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(Attribute::SymbolRef(path)) = op.attr("callee") else {
        return Err(op_error(
            op,
            "requires a 'callee' symbol reference attribute",
        ));
    };
    let callee = path.join("::@");
    let target = (path.len() == 1).then(|| ctx.lookup(&path[0])).flatten();
    let Some(f) = target.filter(|f| f.name == "func.func") else {
        return Err(op_error(
            op,
            format!("'{callee}' does not reference a valid function"),
        ));
    };
    let Some((inputs, results)) = fn_type(f) else {
        return Ok(());
    };
    check_call_types(op, &op.operands, inputs, results)
}

fn verify_call_indirect(op: &Operation, _: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(Type::Function { inputs, results }) = op.operands.first().map(|v| &v.ty) else {
        return Err(op_error(op, "operand #0 must be function type"));
    };
    check_call_types(op, &op.operands[1..], inputs, results)
}

fn verify_constant(op: &Operation, ctx: &VerifyContext) -> Result<(), Diagnostic> {
    let Some(name) = op.attr("value").and_then(Attribute::as_symbol) else {
        return Err(op_error(op, "requires a flat symbol reference 'value'"));
    };
    let Some(f) = ctx.lookup(name).filter(|f| f.name == "func.func") else {
        return Err(op_error(
            op,
            format!("reference to undefined function '{name}'"),
        ));
    };
    let want = f.attr("function_type").and_then(Attribute::as_type);
    if op.results.first().map(|r| &r.ty) != want {
        return Err(op_error(op, "reference to function with mismatched type"));
    }
    Ok(())
}

// ---- assembly ---------------------------------------------------------------------------

/// The attributes a custom form prints in its `attr-dict`, without those it spells itself.
pub(crate) fn rest_attrs(op: &Operation, elided: &[&str]) -> AttrDict {
    op.attrs
        .iter()
        .filter(|(k, _)| !elided.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// ` {a = 1}` (or ` attributes {a = 1}`), or nothing.
pub(crate) fn attr_dict_text(op: &Operation, elided: &[&str], keyword: bool) -> String {
    let rest = rest_attrs(op, elided);
    if rest.is_empty() {
        return String::new();
    }
    let mut s = String::from(if keyword { " attributes " } else { " " });
    let _ = write_dict(&mut s, &rest);
    s
}

/// An optional attribute dictionary at the current token.
pub(crate) fn optional_attr_dict(p: &mut Parser, op: &mut Operation) -> Result<(), Diagnostic> {
    if p.is(K::LBrace) {
        for (k, v) in p.attr_dict()? {
            op.attrs.insert(k, v);
        }
    }
    Ok(())
}

pub(crate) static FUNC_ASM: OpAsm = OpAsm {
    parse: parse_func,
    print: print_func,
};

fn parse_func(p: &mut Parser, op: &mut Operation, _: usize) -> Result<(), Diagnostic> {
    for vis in ["private", "public", "nested"] {
        if p.eat_word(vis) {
            op.set_attr("sym_visibility", Attribute::String(vis.into()));
        }
    }
    if !p.is(K::AtIdent) {
        return Err(p.err("expected valid '@'-identifier for symbol name"));
    }
    let name = p.symbol_name()?;
    op.set_attr("sym_name", Attribute::String(name));
    // Arguments: all named (`%a: i32`) or all types.
    p.expect(K::LParen, "'('")?;
    let mut args: Vec<RegionArg> = Vec::new();
    let mut types = Vec::new();
    let mut arg_attrs = Vec::new();
    let mut named: Option<bool> = None;
    p.comma_list(K::RParen, ")", |p| {
        let at = p.here();
        let is_named = p.is(K::PercentIdent);
        match named {
            Some(true) if !is_named => return Err(p.err_here("expected SSA identifier")),
            Some(false) if is_named => {
                return Err(p.err_here("expected type instead of SSA identifier"))
            }
            _ => named = Some(is_named),
        }
        let mut name = None;
        if is_named {
            let t = p.bump();
            name = Some(t.text(p.text)[1..].to_string());
            p.expect(K::Colon, "':'")?;
        }
        let ty = p.type_()?;
        let attrs = if p.is(K::LBrace) {
            p.attr_dict()?
        } else {
            AttrDict::new()
        };
        let loc = p.optional_trailing_location()?;
        types.push(ty.clone());
        arg_attrs.push(attrs);
        if let Some(name) = name {
            args.push(RegionArg { name, ty, loc, at });
        }
        Ok(())
    })?;
    let mut results = Vec::new();
    let mut res_attrs = Vec::new();
    if p.eat(K::Arrow) {
        if p.eat(K::LParen) {
            p.comma_list(K::RParen, ")", |p| {
                results.push(p.type_()?);
                res_attrs.push(if p.is(K::LBrace) {
                    p.attr_dict()?
                } else {
                    AttrDict::new()
                });
                Ok(())
            })?;
        } else {
            results.push(p.non_function_type()?);
            res_attrs.push(AttrDict::new());
        }
    }
    op.set_attr(
        "function_type",
        Attribute::Type(Type::Function {
            inputs: types,
            results,
        }),
    );
    let dict_at = p.tok.start;
    if p.eat_word("attributes") {
        let d = p.attr_dict()?;
        for disallowed in ["sym_visibility", "sym_name", "function_type"] {
            if d.contains_key(disallowed) {
                return Err(p.err_at(
                    dict_at,
                    format!("'{disallowed}' is an inferred attribute and should not be specified in the explicit attribute dictionary"),
                ));
            }
        }
        op.attrs.extend(d);
    }
    if arg_attrs.iter().any(|d| !d.is_empty()) {
        op.set_attr(
            "arg_attrs",
            Attribute::Array(arg_attrs.into_iter().map(Attribute::Dict).collect()),
        );
    }
    if res_attrs.iter().any(|d| !d.is_empty()) {
        op.set_attr(
            "res_attrs",
            Attribute::Array(res_attrs.into_iter().map(Attribute::Dict).collect()),
        );
    }
    if p.is(K::LBrace) {
        let at = p.tok.start;
        // Unnamed arguments: the body names them in its entry block's label.
        let body = p.region(&args, false, Some("func"))?;
        if body.blocks.is_empty() {
            return Err(p.err_at(at, "expected non-empty function body"));
        }
        op.regions.push(body);
    } else {
        op.regions.push(crate::ir::Region::default());
    }
    Ok(())
}

fn print_func(op: &Operation, p: &mut Printer) -> String {
    let mut out = String::new();
    if let Some(v) = op.attr("sym_visibility").and_then(Attribute::as_str) {
        out.push_str(v);
        out.push(' ');
    }
    out.push_str(&symbol_name(op.symbol_name().unwrap_or("")));
    let (inputs, results) = fn_type(op).unwrap_or((&[], &[]));
    let dicts = |key: &str, n: usize| -> Vec<Option<AttrDict>> {
        let items = op.attr(key).and_then(Attribute::as_array).unwrap_or(&[]);
        (0..n)
            .map(|i| match items.get(i) {
                Some(Attribute::Dict(d)) if !d.is_empty() => Some(d.clone()),
                _ => None,
            })
            .collect()
    };
    let arg_attrs = dicts("arg_attrs", inputs.len());
    let res_attrs = dicts("res_attrs", results.len());
    let entry = op.regions.first().and_then(|r| r.blocks.first());
    let mut args = Vec::new();
    for (i, t) in inputs.iter().enumerate() {
        let mut s = String::new();
        if let Some(a) = entry.and_then(|b| b.args.get(i)) {
            s.push_str(&p.arg_name(a));
            s.push_str(": ");
        }
        s.push_str(&t.to_string());
        if let Some(d) = &arg_attrs[i] {
            s.push(' ');
            let _ = write_dict(&mut s, d);
        }
        if let Some(l) = entry.and_then(|b| b.arg_locs.get(i)) {
            s.push_str(&p.loc_suffix(l));
        }
        args.push(s);
    }
    out.push_str(&format!("({})", args.join(", ")));
    if !results.is_empty() {
        out.push_str(" -> ");
        let plain = results.len() == 1
            && res_attrs[0].is_none()
            && !matches!(results[0], Type::Function { .. });
        if plain {
            out.push_str(&results[0].to_string());
        } else {
            let items: Vec<String> = results
                .iter()
                .zip(&res_attrs)
                .map(|(t, d)| {
                    let mut s = t.to_string();
                    if let Some(d) = d {
                        s.push(' ');
                        let _ = write_dict(&mut s, d);
                    }
                    s
                })
                .collect();
            out.push_str(&format!("({})", items.join(", ")));
        }
    }
    out.push_str(&attr_dict_text(
        op,
        &[
            "sym_name",
            "function_type",
            "sym_visibility",
            "arg_attrs",
            "res_attrs",
        ],
        true,
    ));
    if let Some(r) = op.regions.first().filter(|r| !r.blocks.is_empty()) {
        out.push(' ');
        out.push_str(&p.region_with(r, false, Some("func")));
    }
    out
}

pub(crate) static RETURN_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        optional_attr_dict(p, op)?;
        if p.is(K::PercentIdent) {
            let mut uses = vec![p.operand_use()?];
            while p.eat(K::Comma) {
                uses.push(p.operand_use()?);
            }
            p.expect(K::Colon, "':'")?;
            let types = p.type_list()?;
            if types.len() != uses.len() {
                return Err(p.err(format!(
                    "{} operands present, but expected {}",
                    uses.len(),
                    types.len()
                )));
            }
            op.operands = p.resolve_all(&uses, &types)?;
        }
        Ok(())
    },
    print: |op, p| {
        let mut out = attr_dict_text(op, &[], false).trim_start().to_string();
        if !op.operands.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            let names: Vec<String> = op.operands.iter().map(|v| p.name_of(v)).collect();
            let types: Vec<String> = op.operands.iter().map(|v| v.ty.to_string()).collect();
            out.push_str(&format!("{} : {}", names.join(", "), types.join(", ")));
        }
        out
    },
};

/// `(%a, %b)` operand uses.
fn operand_list_parens(
    p: &mut Parser,
) -> Result<Vec<crate::syntax::parser::OperandUse>, Diagnostic> {
    p.expect(K::LParen, "'('")?;
    let mut uses = Vec::new();
    p.comma_list(K::RParen, ")", |p| {
        uses.push(p.operand_use()?);
        Ok(())
    })?;
    Ok(uses)
}

fn expect_fn_type(p: &mut Parser) -> Result<(Vec<Type>, Vec<Type>), Diagnostic> {
    let at = p.tok.start;
    match p.type_()? {
        Type::Function { inputs, results } => Ok((inputs, results)),
        _ => Err(p.err_at(at, "expected function type")),
    }
}

fn set_results(op: &mut Operation, types: Vec<Type>) {
    op.results = types.into_iter().map(|t| Value::new(t, None)).collect();
}

pub(crate) static CALL_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        if !p.is(K::AtIdent) {
            return Err(p.err("expected attribute value"));
        }
        let callee = p.symbol_ref()?;
        op.set_attr("callee", Attribute::SymbolRef(callee));
        let uses = operand_list_parens(p)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let (inputs, results) = expect_fn_type(p)?;
        if inputs.len() != uses.len() {
            return Err(p.err(format!(
                "{} operands present, but expected {}",
                uses.len(),
                inputs.len()
            )));
        }
        op.operands = p.resolve_all(&uses, &inputs)?;
        set_results(op, results);
        Ok(())
    },
    print: |op, p| {
        let callee = op
            .attr("callee")
            .map(ToString::to_string)
            .unwrap_or_default();
        let names: Vec<String> = op.operands.iter().map(|v| p.name_of(v)).collect();
        let ins: Vec<Type> = op.operands.iter().map(|v| v.ty.clone()).collect();
        let outs: Vec<Type> = op.results.iter().map(|v| v.ty.clone()).collect();
        format!(
            "{callee}({}){} : {}",
            names.join(", "),
            attr_dict_text(op, &["callee"], false),
            Type::Function {
                inputs: ins,
                results: outs
            }
        )
    },
};

pub(crate) static CALL_INDIRECT_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        let callee = p.operand_use()?;
        let uses = operand_list_parens(p)?;
        optional_attr_dict(p, op)?;
        p.expect(K::Colon, "':'")?;
        let at = p.tok.start;
        let ty = p.type_()?;
        let Type::Function { inputs, results } = ty.clone() else {
            return Err(p.err_at(at, "expected function type"));
        };
        if inputs.len() != uses.len() {
            return Err(p.err_at(
                at,
                format!(
                    "{} operands present, but expected {}",
                    uses.len(),
                    inputs.len()
                ),
            ));
        }
        op.operands = vec![p.resolve(&callee, &ty)?];
        op.operands.extend(p.resolve_all(&uses, &inputs)?);
        set_results(op, results);
        Ok(())
    },
    print: |op, p| {
        let callee = op
            .operands
            .first()
            .map(|v| p.name_of(v))
            .unwrap_or_default();
        let names: Vec<String> = op.operands.iter().skip(1).map(|v| p.name_of(v)).collect();
        let ty = op
            .operands
            .first()
            .map(|v| v.ty.to_string())
            .unwrap_or_default();
        format!(
            "{callee}({}){} : {ty}",
            names.join(", "),
            attr_dict_text(op, &[], false)
        )
    },
};

pub(crate) static CONSTANT_ASM: OpAsm = OpAsm {
    parse: |p, op, _| {
        optional_attr_dict(p, op)?;
        if !p.is(K::AtIdent) {
            return Err(p.err("expected attribute value"));
        }
        let sym = p.symbol_ref()?;
        op.set_attr("value", Attribute::SymbolRef(sym));
        p.expect(K::Colon, "':'")?;
        let ty = p.type_()?;
        set_results(op, vec![ty]);
        Ok(())
    },
    print: |op, _| {
        let v = op
            .attr("value")
            .map(ToString::to_string)
            .unwrap_or_default();
        let ty = op
            .results
            .first()
            .map(|r| r.ty.to_string())
            .unwrap_or_default();
        let rest = attr_dict_text(op, &["value"], false);
        if rest.is_empty() {
            format!("{v} : {ty}")
        } else {
            format!("{} {v} : {ty}", rest.trim_start())
        }
    },
};
