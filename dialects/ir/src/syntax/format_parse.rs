//! Reading a custom-form op with its declarative format (`syntax::format`): the format pulls
//! what it needs from the parser's token stream, so the op ends where its format ends (on its
//! line or several). A dialect attribute with a custom syntax ([`CustomAttrSyntax`]) gets
//! one token tree ([`Tok`]: a bracketed group or a single token).
//!
//! [`CustomAttrSyntax`]: crate::registry::CustomAttrSyntax

use crate::attributes::Attribute;
use crate::diag::{Diagnostic, Location};
use crate::ir::{AttrDict, Operation, Region, Value};
use crate::registry::{AttrKind, OpDef, Trait};
use crate::syntax::format::{first_anchor, parse_attr_tok, FmtElem};
use crate::syntax::lexer::TokenKind as K;
use crate::syntax::parser::{OperandUse, Parser};
use crate::syntax::tokens::{Tok, TokKind};
use crate::types::Type;

/// What a format read, before the operands are resolved.
#[derive(Default)]
struct Parsed {
    operands: Vec<Vec<OperandUse>>,
    operand_types: Vec<Option<Vec<Type>>>,
    fn_inputs: Option<(Vec<Type>, Location)>,
    attrs: AttrDict,
    regions: Vec<Option<Region>>,
    result_types: Option<Vec<Type>>,
}

/// Parses a custom-form op (its name already read) with its compiled format.
pub(crate) fn parse_custom(
    p: &mut Parser,
    def: &OpDef,
    elems: &[FmtElem],
    nresults: usize,
    loc: Location,
) -> Result<Operation, Diagnostic> {
    let mut st = Parsed {
        operands: vec![Vec::new(); def.operands.len()],
        operand_types: vec![None; def.operands.len()],
        regions: vec![None; def.regions.len()],
        ..Default::default()
    };
    parse_elems(p, def, elems, &mut st)?;
    let mut op = Operation::new(def.name).with_loc(loc.clone());
    op.attrs = st.attrs;
    for (i, r) in st.regions.into_iter().enumerate() {
        op.regions.push(r.ok_or_else(|| {
            Diagnostic::error(loc.clone(), format!("missing region '{}'", def.regions[i]))
        })?);
    }
    let types = match st.result_types {
        Some(t) => t,
        None if nresults == 0 => vec![],
        None if def.has_trait(Trait::SameOperandsAndResultType) => {
            let first = st.operands.iter().flatten().next().cloned();
            let ty = match (&st.operand_types.iter().flatten().next(), first) {
                (Some(t), _) if !t.is_empty() => Some(t[0].clone()),
                (_, Some(u)) => p.lookup(&u)?.map(|v| v.ty),
                _ => None,
            };
            match ty {
                Some(t) => vec![t; nresults],
                None => {
                    return Err(Diagnostic::error(
                        loc,
                        format!("'{}' produces no results", def.name),
                    ))
                }
            }
        }
        None => {
            return Err(Diagnostic::error(
                loc,
                format!("'{}' produces no results", def.name),
            ))
        }
    };
    if types.len() != nresults {
        return Err(Diagnostic::error(
            loc,
            format!(
                "{} result types given for {nresults} result names",
                types.len()
            ),
        ));
    }
    // Operand types: the format's `type($x)`, a functional type, the result type for ops
    // whose operands and result share it, or the type the value was defined with.
    let same = def.has_trait(Trait::SameOperandsAndResultType);
    let mut fn_inputs = st.fn_inputs.map(|(t, l)| (t.into_iter(), l));
    if let Some((inputs, l)) = &fn_inputs {
        let n: usize = st.operands.iter().map(Vec::len).sum();
        if inputs.len() != n {
            return Err(Diagnostic::error(
                l.clone(),
                "operand types in the function type do not match the operands",
            ));
        }
    }
    for (i, uses) in st.operands.iter().enumerate() {
        for (k, u) in uses.iter().enumerate() {
            let given = st.operand_types[i]
                .as_ref()
                .and_then(|t| t.get(k).or(t.first()))
                .cloned();
            let from_fn = fn_inputs.as_mut().and_then(|(it, _)| it.next());
            let ty = given
                .or(from_fn)
                .or_else(|| same.then(|| types.first().cloned()).flatten());
            let v = match ty {
                Some(t) => p.resolve(u, &t)?,
                None => p.lookup(u)?.ok_or_else(|| {
                    Diagnostic::error(
                        u.loc.clone(),
                        format!("use of undeclared SSA value name '%{}'", u.name),
                    )
                })?,
            };
            op.operands.push(v);
        }
    }
    op.results = types.into_iter().map(|t| Value::new(t, None)).collect();
    Ok(op)
}

/// Whether the current token spells literal `l` of a format.
fn at_literal(p: &Parser, l: &str) -> bool {
    match p.tok.kind {
        K::BareIdent => p.tok_text() == l,
        K::Eof | K::Error | K::String => false,
        _ => p.tok_text() == l,
    }
}

fn parse_elems(
    p: &mut Parser,
    def: &OpDef,
    elems: &[FmtElem],
    st: &mut Parsed,
) -> Result<(), Diagnostic> {
    for e in elems {
        match e {
            FmtElem::Lit(l) => {
                if !at_literal(p, l) {
                    return Err(expected(p, &format!("'{l}'")));
                }
                p.bump();
            }
            FmtElem::Group(open, inner) => {
                let (ok, close) = if *open == '(' {
                    (K::LParen, K::RParen)
                } else {
                    (K::LSquare, K::RSquare)
                };
                if !p.is(ok) {
                    return Err(expected(p, &format!("'{open}'")));
                }
                p.bump();
                parse_elems(p, def, inner, st)?;
                if !p.eat(close) {
                    return Err(Diagnostic::error(
                        p.here(),
                        format!("unexpected {} in '{}'", describe(p), def.name),
                    ));
                }
            }
            FmtElem::Operand(i) => {
                let arg = def.operands[*i];
                if arg.variadic {
                    while p.is(K::PercentIdent) {
                        st.operands[*i].push(p.operand_use()?);
                        if !p.is(K::Comma) {
                            break;
                        }
                        // A ',' not followed by a value is not part of the list.
                        let mut l = p.lex.clone();
                        if l.lex().kind != K::PercentIdent {
                            break;
                        }
                        p.bump();
                    }
                } else if p.is(K::PercentIdent) {
                    st.operands[*i].push(p.operand_use()?);
                } else {
                    return Err(expected(
                        p,
                        &format!("SSA value for operand '{}'", arg.name),
                    ));
                }
            }
            FmtElem::Attr(i) if matches!(def.attrs[*i].kind, AttrKind::Unit) => {
                // A unit attribute is spelled by the literal before it (`transpose_b`).
                st.attrs
                    .insert(def.attrs[*i].name.to_string(), Attribute::Unit);
            }
            FmtElem::Attr(i) => {
                let a = def.attrs[*i];
                let value = attr_of_kind(p, a.kind, a.name)?;
                st.attrs.insert(a.name.to_string(), value);
            }
            FmtElem::Region(i) => {
                if !p.is(K::LBrace) {
                    return Err(expected(p, "a region"));
                }
                st.regions[*i] = Some(p.region(&[], false, def.default_dialect())?);
            }
            FmtElem::OperandType(i) => {
                let n = st.operands[*i].len().max(1);
                let mut tys = Vec::new();
                for k in 0..n {
                    if k > 0 && !p.eat(K::Comma) {
                        return Err(expected(p, "','"));
                    }
                    tys.push(type_here(p)?);
                }
                st.operand_types[*i] = Some(tys);
            }
            FmtElem::ResultTypes => st.result_types = Some(types_maybe_grouped(p)?),
            FmtElem::FunctionalType => {
                let at = p.here();
                if !p.is(K::LParen) {
                    return Err(expected(p, "'(' of a function type"));
                }
                let inputs = p.type_list_parens()?;
                if !p.eat(K::Arrow) {
                    return Err(expected(p, "'->'"));
                }
                let results = types_maybe_grouped(p)?;
                st.fn_inputs = Some((inputs, at));
                st.result_types = Some(results);
            }
            FmtElem::AttrDict | FmtElem::AttrDictWithKeyword => {
                if matches!(e, FmtElem::AttrDictWithKeyword) {
                    if !p.eat_word("attributes") {
                        continue;
                    }
                } else if !(p.is(K::LBrace) && dict_follows(p)) {
                    continue;
                }
                for (k, v) in p.attr_dict()? {
                    st.attrs.insert(k, v);
                }
            }
            FmtElem::Optional(inner) => {
                let present = match &inner[0] {
                    FmtElem::Lit(l) => at_literal(p, l),
                    FmtElem::Group(c, _) => p.tok_text().starts_with(*c),
                    FmtElem::Attr(i) => {
                        let kind = def.attrs[*i].kind;
                        p.lookahead_ok(|p| attr_of_kind(p, kind, ""))
                    }
                    FmtElem::Operand(_) => p.is(K::PercentIdent),
                    _ => false,
                };
                if present {
                    parse_elems(p, def, inner, st)?;
                    if let Some(FmtElem::Attr(i)) = first_anchor(inner) {
                        let a = def.attrs[*i];
                        if matches!(a.kind, AttrKind::Unit) {
                            st.attrs.insert(a.name.to_string(), Attribute::Unit);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether the `{` at the current token opens an attribute dictionary (a key, then `=`, `,`
/// or `}`) rather than a region.
fn dict_follows(p: &Parser) -> bool {
    let mut l = p.lex.clone();
    let key = l.lex();
    if !matches!(key.kind, K::BareIdent | K::String) {
        return false;
    }
    matches!(l.lex().kind, K::Equal | K::Comma | K::RBrace)
}

fn describe(p: &Parser) -> String {
    match p.tok.kind {
        K::Eof => "end of input".into(),
        K::PercentIdent => format!("value '{}'", p.tok_text()),
        _ => format!("'{}'", p.tok_text()),
    }
}

fn expected(p: &Parser, what: &str) -> Diagnostic {
    if p.is(K::Eof) {
        return p.err(format!("expected {what}"));
    }
    p.err(format!("expected {what}, found {}", describe(p)))
}

fn type_here(p: &mut Parser) -> Result<Type, Diagnostic> {
    if !starts_type(p) {
        return Err(expected(p, "a type"));
    }
    p.type_()
}

/// Whether the current token can start a type.
fn starts_type(p: &Parser) -> bool {
    match p.tok.kind {
        K::ExclaimIdent | K::LParen => true,
        K::BareIdent => is_type_word(p.tok_text()),
        _ => false,
    }
}

/// Whether a bare word names a builtin type (or starts one).
pub(crate) fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "bf16"
            | "f16"
            | "f32"
            | "f64"
            | "index"
            | "none"
            | "tensor"
            | "memref"
            | "vector"
            | "complex"
            | "tuple"
    ) || crate::types::FloatKind::ALL
        .iter()
        .any(|k| k.spelling() == w)
        || ["i", "si", "ui"].iter().any(|p| {
            w.strip_prefix(p)
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        })
}

/// Whether the current token starts the next operation: a registered op's name, or a
/// result `%x =` / `%x, %y =`, at the start of a line. A bracketed group of a custom syntax
/// that meets one was left open.
fn starts_op(p: &Parser) -> bool {
    let b = p.text.as_bytes();
    let mut i = p.tok.start;
    while i > 0 && matches!(b[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    if i > 0 && b[i - 1] != b'\n' {
        return false;
    }
    match p.tok.kind {
        K::BareIdent => p.resolve_op_name(p.tok_text()).is_some(),
        K::PercentIdent => {
            let mut l = p.lex.clone();
            matches!(l.lex().kind, K::Equal | K::Comma | K::Colon)
        }
        _ => false,
    }
}

/// `t, t` or `(t, t)`.
fn types_maybe_grouped(p: &mut Parser) -> Result<Vec<Type>, Diagnostic> {
    if p.is(K::LParen) {
        // `(i32) -> i32` would be a function type: a parenthesised list is the results.
        return p.type_list_parens();
    }
    let mut out = vec![type_here(p)?];
    while p.is(K::Comma) {
        let mut l = p.lex.clone();
        let next = l.lex();
        let word_is_type = next.kind == K::BareIdent && is_type_word(next.text(p.text));
        if !(word_is_type || matches!(next.kind, K::ExclaimIdent | K::LParen)) {
            break;
        }
        p.bump();
        out.push(type_here(p)?);
    }
    Ok(out)
}

/// Reads an attribute of the given kind, with the messages of its token-level syntax.
fn attr_of_kind(p: &mut Parser, kind: AttrKind, name: &str) -> Result<Attribute, Diagnostic> {
    // At the end of the input: right after the last token, where the attribute is missing.
    let at = if p.is(K::Eof) {
        p.err("").loc
    } else {
        p.here()
    };
    let wrap = |m: String| Diagnostic::error(at.clone(), format!("attribute '{name}': {m}"));
    match kind {
        AttrKind::Type => {
            if !starts_type(p) {
                return Err(wrap(format!("expected a type, found {}", describe(p))));
            }
            Ok(Attribute::Type(p.type_()?))
        }
        AttrKind::Any if matches!(p.tok.kind, K::HashIdent | K::LBrace) || p.is_word("dense") => {
            p.attribute()
        }
        _ => {
            if matches!(p.tok.kind, K::Eof | K::RBrace | K::RParen | K::RSquare) {
                return Err(Diagnostic::error(
                    at,
                    format!("expected attribute '{name}'"),
                ));
            }
            let tok = read_tok(p)?;
            parse_attr_tok(kind, &tok).map_err(wrap)
        }
    }
}

/// One token tree of the stream as the custom attribute syntaxes take it: a `(...)` or
/// `[...]` group (an unclosed one is an error at its opening bracket) or one token.
pub(crate) fn read_tok(p: &mut Parser) -> Result<Tok, Diagnostic> {
    p.descend()?;
    let r = read_tok_inner(p);
    p.ascend();
    r
}

fn read_tok_inner(p: &mut Parser) -> Result<Tok, Diagnostic> {
    let loc = p.here();
    let t = p.tok;
    let text = p.tok_text();
    let kind = match t.kind {
        K::LParen | K::LSquare => {
            let (open, close, close_c) = if t.kind == K::LParen {
                ('(', K::RParen, ')')
            } else {
                ('[', K::RSquare, ']')
            };
            p.bump();
            let mut items = Vec::new();
            while !p.is(close) {
                if matches!(p.tok.kind, K::Eof | K::RBrace | K::RParen | K::RSquare) || starts_op(p)
                {
                    let stop = p.here();
                    return Err(Diagnostic::error(
                        loc,
                        format!(
                            "'{open}' is not closed: expected '{close_c}' before {}",
                            describe(p)
                        ),
                    )
                    .with_note(
                        stop,
                        format!("the bracketed group ends here, without its '{close_c}'"),
                    ));
                }
                items.push(read_tok(p)?);
            }
            p.bump();
            TokKind::Group(open, items)
        }
        K::Minus => {
            let next = p.lex.clone().lex();
            if matches!(next.kind, K::Integer | K::Float) && next.start == t.end {
                p.bump();
                let n = p.bump();
                TokKind::Number(format!("-{}", n.text(p.text)))
            } else {
                p.bump();
                TokKind::Punct("-".into())
            }
        }
        K::Integer | K::Float => {
            p.bump();
            TokKind::Number(text.to_string())
        }
        K::String => TokKind::Str(p.string_value()?),
        K::AtIdent => TokKind::Symbol(p.symbol_ref()?),
        K::PercentIdent => {
            let u = p.operand_use()?;
            let v = p.lookup(&u)?.ok_or_else(|| {
                Diagnostic::error(
                    u.loc.clone(),
                    format!("use of undeclared SSA value name '%{}'", u.name),
                )
            })?;
            TokKind::Value(v)
        }
        K::HashIdent => TokKind::Attr(p.attribute()?),
        K::LBrace => TokKind::Attr(p.attribute()?),
        K::ExclaimIdent => {
            let ty = p.type_()?;
            TokKind::Type(ty, p.text[t.start..p.prev_end()].to_string())
        }
        K::BareIdent if is_type_word(text) => {
            let ty = p.type_()?;
            TokKind::Type(ty, p.text[t.start..p.prev_end()].to_string())
        }
        K::BareIdent => {
            p.bump();
            TokKind::Keyword(text.to_string())
        }
        K::Eof | K::Error | K::RBrace | K::RParen | K::RSquare => {
            return Err(p.err(format!("unexpected {}", describe(p))));
        }
        _ => {
            p.bump();
            TokKind::Punct(text.to_string())
        }
    };
    Ok(Tok { kind, loc })
}
