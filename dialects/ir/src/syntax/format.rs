//! Declarative assembly formats: one format string per op drives both its custom parser and
//! its custom printer (so printing what was parsed is a fixed point).
//!
//! Format elements, as in MLIR's `assemblyFormat`:
//! - `` `kw` `` a literal keyword or punctuation; `` `(` ... `)` `` and `` `[` ... `]` `` a
//!   bracketed group;
//! - `$name` an operand (or variadic operand list), attribute or region of the op;
//! - `type($operand)` / `type(results)` the types of an operand list or of the results;
//! - `functional-type(operands, results)`;
//! - `attr-dict` the attributes not named elsewhere in the format;
//! - `( ... )?` an optional group: printed when its first variable (attribute or operand list)
//!   is present/non-empty; parsed when its first literal is next.

use crate::attributes::{quote, symbol_name, Attribute};
use crate::ir::{AttrDict, Operation, Region, Value};
use crate::registry::{AttrKind, OpDef};
use crate::syntax::int_literal::{float_from_hex, is_hex_literal, is_int_literal, parse_i64};
use crate::syntax::tokens::{Tok, TokKind};
use crate::types::Type;

#[derive(Debug, Clone, PartialEq)]
pub enum FmtElem {
    Lit(String),
    Operand(usize),
    Attr(usize),
    Region(usize),
    OperandType(usize),
    ResultTypes,
    FunctionalType,
    AttrDict,
    /// `attributes {...}` when any attribute is left.
    AttrDictWithKeyword,
    Group(char, Vec<FmtElem>),
    Optional(Vec<FmtElem>),
}

/// The first attribute or operand of a sequence (looking into bracket groups): the anchor
/// that decides whether an optional group is printed.
pub(crate) fn first_anchor(elems: &[FmtElem]) -> Option<&FmtElem> {
    elems.iter().find_map(|e| match e {
        FmtElem::Attr(_) | FmtElem::Operand(_) => Some(e),
        FmtElem::Group(_, inner) => first_anchor(inner),
        _ => None,
    })
}

/// Compiles a format string against an op definition.
pub fn parse_format(text: &str, def: &OpDef) -> Result<Vec<FmtElem>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pos = 0;
    let elems = parse_seq(&chars, &mut pos, def, None)?;
    if pos != chars.len() {
        return Err(format!("unexpected '{}' at {pos}", chars[pos]));
    }
    Ok(elems)
}

fn lookup_var(name: &str, def: &OpDef) -> Result<FmtElem, String> {
    if let Some(i) = def.operands.iter().position(|a| a.name == name) {
        return Ok(FmtElem::Operand(i));
    }
    if let Some(i) = def.attrs.iter().position(|a| a.name == name) {
        return Ok(FmtElem::Attr(i));
    }
    if let Some(i) = def.regions.iter().position(|r| *r == name) {
        return Ok(FmtElem::Region(i));
    }
    Err(format!(
        "'{name}' is not an operand, attribute or region of {}",
        def.name
    ))
}

fn parse_seq(
    c: &[char],
    pos: &mut usize,
    def: &OpDef,
    close: Option<&str>,
) -> Result<Vec<FmtElem>, String> {
    let mut out = Vec::new();
    loop {
        while *pos < c.len() && c[*pos].is_whitespace() {
            *pos += 1;
        }
        if *pos >= c.len() {
            return match close {
                None => Ok(out),
                Some(cl) => Err(format!("missing '{cl}'")),
            };
        }
        let rest: String = c[*pos..].iter().collect();
        if let Some(cl) = close {
            if rest.starts_with(cl) {
                *pos += cl.chars().count();
                return Ok(out);
            }
        }
        if c[*pos] == '`' {
            let end = c[*pos + 1..]
                .iter()
                .position(|&x| x == '`')
                .ok_or("unterminated literal")?
                + *pos
                + 1;
            let lit: String = c[*pos + 1..end].iter().collect();
            *pos = end + 1;
            match lit.as_str() {
                "(" | "[" => {
                    let closer = if lit == "(" { "`)`" } else { "`]`" };
                    let inner = parse_seq(c, pos, def, Some(closer))?;
                    out.push(FmtElem::Group(lit.chars().next().unwrap_or('('), inner));
                }
                _ => out.push(FmtElem::Lit(lit)),
            }
        } else if c[*pos] == '$' {
            *pos += 1;
            let start = *pos;
            while *pos < c.len() && (c[*pos].is_alphanumeric() || c[*pos] == '_') {
                *pos += 1;
            }
            let name: String = c[start..*pos].iter().collect();
            out.push(lookup_var(&name, def)?);
            if *pos < c.len() && c[*pos] == '^' {
                *pos += 1;
            }
        } else if rest.starts_with("attr-dict-with-keyword") {
            *pos += "attr-dict-with-keyword".len();
            out.push(FmtElem::AttrDictWithKeyword);
        } else if rest.starts_with("attr-dict") {
            *pos += "attr-dict".len();
            out.push(FmtElem::AttrDict);
        } else if rest.starts_with("functional-type(operands, results)") {
            *pos += "functional-type(operands, results)".len();
            out.push(FmtElem::FunctionalType);
        } else if rest.starts_with("type(") {
            *pos += 5;
            let end = c[*pos..]
                .iter()
                .position(|&x| x == ')')
                .ok_or("unterminated type(")?
                + *pos;
            let arg: String = c[*pos..end].iter().collect::<String>().trim().to_string();
            *pos = end + 1;
            if arg == "results" {
                out.push(FmtElem::ResultTypes);
            } else {
                match lookup_var(arg.trim_start_matches('$'), def)? {
                    FmtElem::Operand(i) => out.push(FmtElem::OperandType(i)),
                    _ => return Err(format!("type({arg}) must name an operand")),
                }
            }
        } else if c[*pos] == '(' {
            *pos += 1;
            let inner = parse_seq(c, pos, def, Some(")?"))?;
            if !matches!(
                inner.first(),
                Some(FmtElem::Lit(_) | FmtElem::Group(..) | FmtElem::Attr(_) | FmtElem::Operand(_))
            ) {
                return Err(
                    "an optional group must start with a literal, an attribute or an operand"
                        .into(),
                );
            }
            if first_anchor(&inner).is_none() {
                return Err("an optional group needs an attribute or operand anchor".into());
            }
            out.push(FmtElem::Optional(inner));
        } else {
            return Err(format!("unexpected '{}' in format", c[*pos]));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Attributes from one token tree (`format_parse` reads the tokens; custom attribute syntaxes
// take them).

fn parse_int(tok: &Tok) -> Result<i64, String> {
    match &tok.kind {
        TokKind::Number(n) => parse_i64(n),
        _ => Err(format!("expected an integer, found {}", tok.describe())),
    }
}

/// Interprets one token as an attribute of the given kind.
pub fn parse_attr_tok(kind: AttrKind, tok: &Tok) -> Result<Attribute, String> {
    match kind {
        AttrKind::SymbolName => match &tok.kind {
            TokKind::Symbol(p) if p.len() == 1 => Ok(Attribute::String(p[0].clone())),
            _ => Err(format!(
                "expected a symbol name '@name', found {}",
                tok.describe()
            )),
        },
        AttrKind::SymbolRef => match &tok.kind {
            TokKind::Symbol(p) => Ok(Attribute::SymbolRef(p.clone())),
            _ => Err(format!(
                "expected a symbol reference, found {}",
                tok.describe()
            )),
        },
        AttrKind::Int => parse_int(tok).map(Attribute::int),
        AttrKind::Float => match &tok.kind {
            // A hex literal is the bit pattern of an f64, as upstream's `parseFloat` reads it.
            TokKind::Number(n) if is_hex_literal(n) => float_from_hex(n, &Type::F64)
                .map(|value| Attribute::Float {
                    value,
                    ty: Type::F64,
                })
                .map_err(|m| format!("'{n}': {m}")),
            TokKind::Number(n) => crate::syntax::parser::finite_float(n)
                .map(|value| Attribute::Float {
                    value,
                    ty: Type::F64,
                })
                .map_err(|m| format!("'{n}': {m}")),
            _ => Err(format!("expected a number, found {}", tok.describe())),
        },
        AttrKind::String => match &tok.kind {
            TokKind::Str(s) => Ok(Attribute::String(s.clone())),
            _ => Err(format!("expected a string, found {}", tok.describe())),
        },
        AttrKind::Bool => match tok.word() {
            Some("true") => Ok(Attribute::Bool(true)),
            Some("false") => Ok(Attribute::Bool(false)),
            _ => Err(format!("expected true or false, found {}", tok.describe())),
        },
        AttrKind::Unit => Ok(Attribute::Unit),
        AttrKind::Keyword(allowed) => match tok.word() {
            Some(w) if allowed.contains(&w) => Ok(Attribute::String(w.to_string())),
            _ => Err(format!(
                "expected one of {}, found {}",
                allowed.join(", "),
                tok.describe()
            )),
        },
        AttrKind::IntArray => match &tok.kind {
            TokKind::Group('[', toks) => comma_items(toks)?
                .into_iter()
                .map(|t| parse_int(t).map(Attribute::int))
                .collect::<Result<Vec<_>, _>>()
                .map(Attribute::Array),
            _ => Err(format!(
                "expected '[' integers ']', found {}",
                tok.describe()
            )),
        },
        AttrKind::SymbolArray => match &tok.kind {
            TokKind::Group('[', toks) => comma_items(toks)?
                .into_iter()
                .map(|t| match &t.kind {
                    TokKind::Symbol(p) => Ok(Attribute::SymbolRef(p.clone())),
                    _ => Err(format!("expected a symbol, found {}", t.describe())),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Attribute::Array),
            _ => Err(format!(
                "expected '[' symbols ']', found {}",
                tok.describe()
            )),
        },
        AttrKind::Type => match &tok.kind {
            TokKind::Type(t, _) => Ok(Attribute::Type(t.clone())),
            _ => Err(format!("expected a type, found {}", tok.describe())),
        },
        AttrKind::Any => any_attr(tok),
        AttrKind::Custom(c) => (c.parse)(tok),
    }
}

/// Splits a bracketed group's tokens at top-level commas; each item must be one token.
pub fn comma_items(toks: &[Tok]) -> Result<Vec<&Tok>, String> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if i % 2 == 1 {
            if t.word() != Some(",") {
                return Err(format!("expected ',', found {}", t.describe()));
            }
        } else {
            out.push(t);
        }
    }
    // Items and commas alternate (checked above), so a trailing ',' is the last token.
    if toks.last().is_some_and(|t| t.word() == Some(",")) {
        return Err("trailing ','".into());
    }
    Ok(out)
}

/// Splits a group's tokens at top-level commas into runs of tokens.
pub fn comma_runs(toks: &[Tok]) -> Vec<&[Tok]> {
    if toks.is_empty() {
        return vec![];
    }
    toks.split(|t| matches!(&t.kind, TokKind::Punct(p) if p == ","))
        .collect()
}

fn any_attr(tok: &Tok) -> Result<Attribute, String> {
    match &tok.kind {
        TokKind::Number(n) => {
            // An integer literal is an integer (i64, MLIR's default), however large: one past
            // i64 is an error, not a float.
            if is_int_literal(n) {
                parse_i64(n).map(Attribute::int)
            } else {
                crate::syntax::parser::finite_float(n)
                    .map(|value| Attribute::Float {
                        value,
                        ty: Type::F64,
                    })
                    .map_err(|m| format!("'{n}': {m}"))
            }
        }
        TokKind::Str(s) => Ok(Attribute::String(s.clone())),
        TokKind::Symbol(p) => Ok(Attribute::SymbolRef(p.clone())),
        TokKind::Type(t, _) => Ok(Attribute::Type(t.clone())),
        TokKind::Attr(a) => Ok(a.clone()),
        TokKind::Keyword(k) if k == "true" || k == "false" => Ok(Attribute::Bool(k == "true")),
        TokKind::Keyword(k) if k == "unit" => Ok(Attribute::Unit),
        TokKind::Group('[', toks) => comma_items(toks)?
            .into_iter()
            .map(any_attr)
            .collect::<Result<Vec<_>, _>>()
            .map(Attribute::Array),
        _ => Err(format!("expected an attribute, found {}", tok.describe())),
    }
}

// ---------------------------------------------------------------------------------------------
// Printing a custom-form op.

/// Hooks the printer supplies: how to name a value and print a region (`dialect`: the
/// default dialect of the ops inside, if the op sets one).
pub trait CustomPrinter {
    fn value(&mut self, v: &Value) -> String;
    fn region(&mut self, r: &Region, dialect: Option<&'static str>) -> String;
}

/// Prints the part of a custom-form op after its name.
pub fn print_custom(
    op: &Operation,
    def: &OpDef,
    elems: &[FmtElem],
    p: &mut dyn CustomPrinter,
) -> String {
    let mut used: Vec<&str> = Vec::new();
    collect_used(def, elems, &mut used);
    let operands = split_operands(op, def);
    let mut pieces = Vec::new();
    print_elems(op, def, elems, &operands, &used, p, &mut pieces);
    join_pieces(&pieces)
}

fn collect_used<'a>(def: &'a OpDef, elems: &[FmtElem], used: &mut Vec<&'a str>) {
    for e in elems {
        match e {
            FmtElem::Attr(i) => used.push(def.attrs[*i].name),
            FmtElem::Group(_, inner) | FmtElem::Optional(inner) => collect_used(def, inner, used),
            _ => {}
        }
    }
}

/// Assigns the op's flat operand list to the definition's operand slots (one variadic slot
/// takes whatever the fixed ones leave).
pub fn split_operands<'a>(op: &'a Operation, def: &OpDef) -> Vec<&'a [Value]> {
    let fixed = def.operands.iter().filter(|a| !a.variadic).count();
    let var_len = op.operands.len().saturating_sub(fixed);
    let mut out = Vec::new();
    let mut pos = 0;
    for a in def.operands {
        let n = if a.variadic { var_len } else { 1 };
        let end = (pos + n).min(op.operands.len());
        out.push(&op.operands[pos.min(end)..end]);
        pos = end;
    }
    out
}

fn print_attr_kind(kind: AttrKind, a: &Attribute) -> String {
    match (kind, a) {
        (AttrKind::SymbolName, Attribute::String(s)) => symbol_name(s),
        (AttrKind::Keyword(_), Attribute::String(s)) => s.clone(),
        (AttrKind::String, Attribute::String(s)) => quote(s),
        (AttrKind::Custom(c), a) => (c.print)(a),
        (AttrKind::Float, Attribute::Float { value, .. }) => {
            crate::attributes::format_float(*value)
        }
        _ => a.to_string(),
    }
}

fn print_elems(
    op: &Operation,
    def: &OpDef,
    elems: &[FmtElem],
    operands: &[&[Value]],
    used: &[&str],
    p: &mut dyn CustomPrinter,
    out: &mut Vec<String>,
) {
    for e in elems {
        match e {
            FmtElem::Lit(l) => out.push(l.clone()),
            FmtElem::Group(c, inner) => {
                let mut sub = Vec::new();
                print_elems(op, def, inner, operands, used, p, &mut sub);
                let close = if *c == '(' { ')' } else { ']' };
                out.push(format!("{c}{}{close}", join_pieces(&sub)));
            }
            FmtElem::Operand(i) => {
                let vals = operands[*i];
                for (k, v) in vals.iter().enumerate() {
                    if k > 0 {
                        out.push(",".into());
                    }
                    out.push(p.value(v));
                }
            }
            FmtElem::Attr(i) => {
                let a = def.attrs[*i];
                if let Some(v) = op.attr(a.name) {
                    if !matches!(a.kind, AttrKind::Unit) {
                        out.push(print_attr_kind(a.kind, v));
                    }
                }
            }
            FmtElem::Region(i) => {
                if let Some(r) = op.regions.get(*i) {
                    out.push(p.region(r, def.default_dialect()));
                }
            }
            FmtElem::OperandType(i) => {
                let tys: Vec<String> = operands[*i].iter().map(|v| v.ty.to_string()).collect();
                out.push(tys.join(", "));
            }
            FmtElem::ResultTypes => {
                let tys: Vec<String> = op.results.iter().map(|v| v.ty.to_string()).collect();
                out.push(tys.join(", "));
            }
            FmtElem::FunctionalType => {
                let ins: Vec<String> = op.operands.iter().map(|v| v.ty.to_string()).collect();
                let outs: Vec<String> = op.results.iter().map(|v| v.ty.to_string()).collect();
                out.push(format!("({})", ins.join(", ")));
                out.push("->".into());
                if outs.len() == 1 {
                    out.push(outs[0].clone());
                } else {
                    out.push(format!("({})", outs.join(", ")));
                }
            }
            FmtElem::AttrDict | FmtElem::AttrDictWithKeyword => {
                let rest: AttrDict = op
                    .attrs
                    .iter()
                    .filter(|(k, _)| !used.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !rest.is_empty() {
                    if matches!(e, FmtElem::AttrDictWithKeyword) {
                        out.push("attributes".into());
                    }
                    let mut s = String::new();
                    let _ = crate::attributes::write_dict(&mut s, &rest);
                    out.push(s);
                }
            }
            FmtElem::Optional(inner) => {
                let present = first_anchor(inner).map(|e| match e {
                    FmtElem::Attr(i) => op.attr(def.attrs[*i].name).is_some(),
                    FmtElem::Operand(i) => !operands[*i].is_empty(),
                    _ => false,
                });
                if present == Some(true) {
                    print_elems(op, def, inner, operands, used, p, out);
                }
            }
        }
    }
}

/// Joins printed pieces with MLIR-like spacing: no space before `,` `)` `]` or a bracket
/// group that follows a word, none after an opening bracket.
pub fn join_pieces(pieces: &[String]) -> String {
    let mut s = String::new();
    let mut prev_piece: &str = "";
    for piece in pieces {
        if piece.is_empty() {
            continue;
        }
        if !s.is_empty() {
            let prev = s.chars().last().unwrap_or(' ');
            let first = piece.chars().next().unwrap_or(' ');
            let after_word = prev.is_alphanumeric() || prev == '_';
            let attach = matches!(first, ',' | ')' | ']')
                || matches!(prev, '(' | '[')
                || (first == '(' && after_word && !prev_piece.starts_with('"'))
                || (first == '[' && prev_piece.starts_with('@'));
            if !attach {
                s.push(' ');
            }
        }
        s.push_str(piece);
        prev_piece = piece;
    }
    s
}
