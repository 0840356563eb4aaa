//! Builds IR from text with the pest grammar. Errors are located diagnostics; no input panics.

use crate::attributes::Attribute;
use crate::diag::{Diagnostic, Location, SourceFile};
use crate::ir::{Block, Operation, Region, Value};
use crate::registry::{Registry, Trait};
use crate::syntax::format::parse_custom;
use crate::syntax::int_literal::{
    float_from_hex, is_hex_literal, is_int_literal, parse_i64, parse_int_as,
};
use crate::syntax::tokens::{Tok, TokKind};
use crate::types::{Signedness, Type};
use indexmap::IndexMap;
use pest::iterators::Pair;
use pest::Parser as _;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(pest_derive::Parser)]
#[grammar = "syntax/grammar.pest"]
pub(crate) struct MlirGrammar;

/// Parses a whole buffer into a `builtin.module` (top-level ops without a module are wrapped).
pub fn parse_source(registry: &Registry, file: &Arc<SourceFile>) -> Result<Operation, Diagnostic> {
    // Some editors start a UTF-8 file with a byte-order mark: not part of the text (and not a
    // column either, as editors show it).
    if let Some(rest) = file.text.strip_prefix('\u{feff}') {
        let unmarked = SourceFile::with_first_line(file.name.as_str(), rest, file.first_line);
        return parse_source(registry, &unmarked);
    }
    // Refused before pest sees it: bracket nesting this deep is past MAX_NESTING levels of
    // operations, attributes and types whatever the brackets are (a level opens at most
    // BRACKETS_PER_LEVEL of them), and pest's backtracking over 100,000 open brackets takes
    // minutes in an optimized build (its stack guard stops it early only in unoptimized ones).
    if let Some(at) = too_deep(
        &file.text,
        file.text.len(),
        BRACKETS_PER_LEVEL * MAX_NESTING,
    ) {
        return Err(nesting_error(file, at));
    }
    let mut pairs = MlirGrammar::parse(Rule::file, &file.text).map_err(|e| pest_error(file, e))?;
    let file_pair = pairs
        .next()
        .ok_or_else(|| Diagnostic::error(file.location(0), "empty parse"))?;
    let mut p = Parser {
        file: file.clone(),
        registry,
        scopes: vec![HashMap::new()],
        depth: Cell::new(0),
    };
    let mut ops = Vec::new();
    for pair in file_pair.into_inner() {
        if pair.as_rule() == Rule::operation {
            ops.push(p.operation(pair)?);
        }
    }
    if ops.len() == 1 && ops[0].name == "builtin.module" {
        return Ok(ops.pop().expect("one op"));
    }
    let mut m = crate::ir::module(ops);
    m.loc = file.location(0);
    Ok(m)
}

/// Parses text given a name for diagnostics.
pub fn parse_str(registry: &Registry, name: &str, text: &str) -> Result<Operation, Diagnostic> {
    parse_source(registry, &SourceFile::new(name, text))
}

fn describe_rule(r: &Rule) -> &'static str {
    match r {
        Rule::operation | Rule::custom_op | Rule::generic_op => "an operation",
        Rule::op_name => "an operation name",
        Rule::value_id => "an SSA value",
        Rule::type_
        | Rule::type_tok
        | Rule::scalar_type
        | Rule::function_type
        | Rule::type_group => "a type",
        Rule::attribute | Rule::typed_number | Rule::type_attr => "an attribute",
        Rule::attr_dict | Rule::dict_attr | Rule::dict_entry | Rule::dict_attr_tok => {
            "an attribute dictionary"
        }
        Rule::string_lit => "a string",
        Rule::symbol_ref => "a symbol",
        Rule::region => "a region",
        Rule::EOI => "end of input",
        Rule::result_list | Rule::result_group => "'='",
        Rule::block | Rule::block_label | Rule::block_id => "a block",
        Rule::number | Rule::uint_lit | Rule::int_lit | Rule::float_lit | Rule::dim => "a number",
        Rule::paren_group | Rule::square_group => "a bracketed group",
        Rule::bare_id | Rule::dialect_name => "an identifier",
        _ => "a token",
    }
}

/// Brackets one level of nesting opens at most: an op in a region `({`, an attribute in an
/// array in a dictionary `{x = [`, a type `<(`.
const BRACKETS_PER_LEVEL: usize = 4;

/// The located "nesting too deep" error at byte `at`.
fn nesting_error(file: &Arc<SourceFile>, at: usize) -> Diagnostic {
    Diagnostic::error(
        file.location(at),
        format!(
            "nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"
        ),
    )
}

/// The offset where the brackets of `text[..end]` (`(`, `[`, `{`, `<`; strings, comments and
/// `->` skipped) first nest deeper than `limit`, if they do.
fn too_deep(text: &str, end: usize, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let (mut depth, mut i) = (0usize, 0);
    while i < end {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < end && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < end && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

fn pest_error(file: &Arc<SourceFile>, e: pest::error::Error<Rule>) -> Diagnostic {
    let offset = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    // Input nested past the limit is reported as such, whether or not pest's stack guard
    // stopped first (it does in unoptimized builds, whose frames are larger).
    if let Some(at) = too_deep(&file.text, offset, MAX_NESTING) {
        return nesting_error(file, at);
    }
    let msg = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives.iter().map(describe_rule).collect();
            names.sort_unstable();
            names.dedup();
            let found = file.text[offset.min(file.text.len())..].chars().next();
            let found = match found {
                None => "end of input".to_string(),
                Some('\n' | '\r') => "end of line".to_string(),
                Some(c) => format!("'{c}'"),
            };
            if names.is_empty() {
                format!("unexpected {found}")
            } else {
                format!("expected {}, found {found}", names.join(" or "))
            }
        }
        // pest's guard against exhausting the native stack on deeply nested input.
        pest::error::ErrorVariant::CustomError { message }
            if message.ends_with("limit reached") =>
        {
            format!("nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types ({message})")
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    Diagnostic::error(file.location(offset), msg)
}

/// How deeply operations, attributes, types and bracketed tokens may nest in the input. The
/// parser, verifier, printer and passes recurse over the IR; this bound keeps them well inside
/// an 8 MiB main-thread stack even in unoptimized builds.
pub const MAX_NESTING: usize = 128;

struct Parser<'r> {
    file: Arc<SourceFile>,
    registry: &'r Registry,
    scopes: Vec<HashMap<String, Value>>,
    /// Current nesting (see `MAX_NESTING`).
    depth: Cell<usize>,
}

/// Why a string literal does not decode: the byte offset in the literal (its opening quote is
/// offset 0) to point at, and the message.
pub type UnquoteError = (usize, String);

/// Decodes an MLIR string literal (with its quotes) as MLIR's lexer does: `\"`, `\\`, `\n`,
/// `\t`, and `\XX` (two hex digits: one byte); any other escape is an error, and so is a raw
/// vertical tab or form feed. The bytes must be UTF-8: strings here are Rust strings, so a
/// `\XX` sequence that MLIR would keep as arbitrary bytes is an error pointing at the escape.
pub fn unquote(s: &str) -> Result<String, UnquoteError> {
    let bytes = s.as_bytes();
    let end = if bytes.len() >= 2 && bytes.last() == Some(&b'"') {
        bytes.len() - 1
    } else {
        bytes.len()
    };
    let start = usize::from(bytes.first() == Some(&b'"')).min(end);
    // The decoded bytes and, for each, the offset in `s` of what it was decoded from.
    let mut out: Vec<u8> = Vec::with_capacity(end - start);
    let mut from: Vec<usize> = Vec::with_capacity(end - start);
    let mut i = start;
    while i < end {
        let b = bytes[i];
        match b {
            b'\\' => {
                let next = bytes[..end].get(i + 1).copied();
                let byte = match next {
                    Some(c @ (b'"' | b'\\')) => Some((c, 2)),
                    Some(b'n') => Some((b'\n', 2)),
                    Some(b't') => Some((b'\t', 2)),
                    Some(h) if h.is_ascii_hexdigit() => bytes[..end]
                        .get(i + 2)
                        .copied()
                        .filter(u8::is_ascii_hexdigit)
                        .map(|l| ((hex_value(h) << 4) | hex_value(l), 3)),
                    _ => None,
                };
                let Some((byte, len)) = byte else {
                    return Err((i, "unknown escape in string literal".to_string()));
                };
                out.push(byte);
                from.push(i);
                i += len;
            }
            b'\n' | 0x0b | 0x0c => {
                return Err((i, "expected '\"' in string literal".to_string()));
            }
            _ => {
                out.push(b);
                from.push(i);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|e| {
        let at = from[e.utf8_error().valid_up_to()];
        (
            at,
            "invalid UTF-8 in string literal: '\\XX' escapes must spell whole UTF-8 characters"
                .to_string(),
        )
    })
}

fn hex_value(h: u8) -> u8 {
    match h {
        b'0'..=b'9' => h - b'0',
        b'a'..=b'f' => h - b'a' + 10,
        _ => h - b'A' + 10,
    }
}

impl<'r> Parser<'r> {
    fn loc(&self, pair: &Pair<Rule>) -> Location {
        self.file.location(pair.as_span().start())
    }
    fn err(&self, pair: &Pair<Rule>, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::error(self.loc(pair), msg)
    }

    /// The decoded value of a `string_lit` pair; a bad escape is an error located at it.
    fn string(&self, pair: &Pair<Rule>) -> Result<String, Diagnostic> {
        unquote(pair.as_str()).map_err(|(at, msg)| {
            Diagnostic::error(self.file.location(pair.as_span().start() + at), msg)
        })
    }

    /// Enters one nesting level; an error past `MAX_NESTING`.
    fn descend(&self, pair: &Pair<Rule>) -> Result<(), Diagnostic> {
        let depth = self.depth.get();
        if depth >= MAX_NESTING {
            return Err(self.err(
                pair,
                format!("nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"),
            ));
        }
        self.depth.set(depth + 1);
        Ok(())
    }

    fn ascend(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    fn lookup_value(&self, pair: &Pair<Rule>) -> Result<Value, Diagnostic> {
        let name = &pair.as_str()[1..];
        for s in self.scopes.iter().rev() {
            if let Some(v) = s.get(name) {
                return Ok(v.clone());
            }
        }
        Err(self.err(pair, format!("use of undeclared SSA value name '%{name}'")))
    }

    fn define(&mut self, pair: &Pair<Rule>, name: &str, v: Value) -> Result<(), Diagnostic> {
        let scope = self.scopes.last_mut().expect("scope");
        if scope.contains_key(name) {
            return Err(Diagnostic::error(
                self.file.location(pair.as_span().start()),
                format!("redefinition of SSA value '%{name}'"),
            ));
        }
        scope.insert(name.to_string(), v);
        Ok(())
    }

    fn operation(&mut self, pair: Pair<Rule>) -> Result<Operation, Diagnostic> {
        self.descend(&pair)?;
        let result = self.operation_inner(pair);
        self.ascend();
        result
    }

    fn operation_inner(&mut self, pair: Pair<Rule>) -> Result<Operation, Diagnostic> {
        let mut inner = pair.into_inner();
        let mut first = inner
            .next()
            .ok_or_else(|| Diagnostic::error(Location::Unknown, "empty operation"))?;
        // Result names, with `%r:2` packs expanded to `%r#0`, `%r#1`.
        let mut result_names: Vec<(String, Pair<Rule>)> = Vec::new();
        if first.as_rule() == Rule::result_list {
            for g in first.clone().into_inner() {
                let mut gi = g.clone().into_inner();
                let id = gi
                    .next()
                    .map(|p| p.as_str()[1..].to_string())
                    .unwrap_or_default();
                match gi.next() {
                    Some(n) => {
                        // `%r:0x2` too, as upstream; past usize is past 4096.
                        let count = parse_int_as::<usize>(n.as_str()).unwrap_or(usize::MAX);
                        if count == 0 || count > 4096 {
                            return Err(
                                self.err(&n, "result pack count must be between 1 and 4096")
                            );
                        }
                        for k in 0..count {
                            result_names.push((format!("{id}#{k}"), g.clone()));
                        }
                    }
                    None => result_names.push((id, g.clone())),
                }
            }
            first = inner.next().ok_or_else(|| {
                Diagnostic::error(Location::Unknown, "missing operation after '='")
            })?;
        }
        let mut op = match first.as_rule() {
            Rule::generic_op => self.generic_op(first, result_names.len())?,
            Rule::custom_op => self.custom_op(first, result_names.len())?,
            _ => return Err(self.err(&first, "expected an operation")),
        };
        if op.results.len() != result_names.len() {
            return Err(Diagnostic::error(
                op.loc.clone(),
                format!(
                    "operation '{}' defines {} results but {} names were given",
                    op.name,
                    op.results.len(),
                    result_names.len()
                ),
            ));
        }
        for (v, (name, pair)) in op.results.iter_mut().zip(&result_names) {
            v.name = Some(name.replace('#', "_"));
            self.define(pair, name, v.clone())?;
        }
        Ok(op)
    }

    fn generic_op(&mut self, pair: Pair<Rule>, _nresults: usize) -> Result<Operation, Diagnostic> {
        let loc = self.loc(&pair);
        let mut inner = pair.into_inner();
        let name_pair = inner
            .next()
            .ok_or_else(|| Diagnostic::error(loc.clone(), "missing op name"))?;
        let name = self.string(&name_pair)?;
        if !name.contains('.') {
            return Err(self.err(&name_pair, format!("op name '{name}' must be 'dialect.op'")));
        }
        let isolated = self
            .registry
            .lookup(&name)
            .is_some_and(|r| r.def.has_trait(Trait::IsolatedFromAbove));
        let mut op = Operation::new(name.clone()).with_loc(loc);
        let mut fn_type = None;
        for part in inner {
            match part.as_rule() {
                Rule::value_list => {
                    for v in part.into_inner() {
                        op.operands.push(self.lookup_value(&v)?);
                    }
                }
                Rule::successors => {
                    op.successors = part.into_inner().map(|b| b.as_str().to_string()).collect()
                }
                Rule::properties => {
                    for d in part.into_inner() {
                        let dict = self.attr_dict(d)?;
                        op.attrs.extend(dict);
                    }
                }
                Rule::region_list => {
                    for r in part.into_inner() {
                        let region = self.region(r, isolated)?;
                        op.regions.push(region);
                    }
                }
                Rule::attr_dict => {
                    let dict = self.attr_dict(part)?;
                    op.attrs.extend(dict);
                }
                Rule::function_type => fn_type = Some((self.type_(part.clone())?, part)),
                Rule::trailing_loc => {}
                _ => return Err(self.err(&part, "unexpected token in generic operation")),
            }
        }
        if let Some(t) = self
            .registry
            .lookup(&name)
            .and_then(|r| r.def.implicit_terminator())
        {
            for region in &mut op.regions {
                for block in &mut region.blocks {
                    if block.ops.last().is_some_and(|o| {
                        o.name == t && o.operands.is_empty() && o.results.is_empty()
                    }) {
                        block.ops.pop();
                    }
                }
            }
        }
        let (ty, ty_pair) =
            fn_type.ok_or_else(|| Diagnostic::error(op.loc.clone(), "missing function type"))?;
        let Type::Function { inputs, results } = ty else {
            return Err(self.err(&ty_pair, "expected a function type"));
        };
        if inputs.len() != op.operands.len() {
            return Err(self.err(
                &ty_pair,
                format!(
                    "{} operands present, but the function type has {} inputs",
                    op.operands.len(),
                    inputs.len()
                ),
            ));
        }
        for (i, (v, t)) in op.operands.iter().zip(&inputs).enumerate() {
            if &v.ty != t {
                return Err(self.err(
                    &ty_pair,
                    format!(
                        "operand #{i} has type '{}', but the function type says '{t}'",
                        v.ty
                    ),
                ));
            }
        }
        op.results = results.into_iter().map(|t| Value::new(t, None)).collect();
        Ok(op)
    }

    fn custom_op(&mut self, pair: Pair<Rule>, nresults: usize) -> Result<Operation, Diagnostic> {
        let loc = self.loc(&pair);
        let end_loc = self.file.location(pair.as_span().end());
        let mut inner = pair.into_inner();
        let name_pair = inner
            .next()
            .ok_or_else(|| Diagnostic::error(loc.clone(), "missing op name"))?;
        let mut name = name_pair.as_str().to_string();
        if name == "module" {
            name = "builtin.module".into();
        }
        let reg = match self.registry.lookup(&name) {
            Some(r) => r.clone(),
            // Upstream MLIR prints the implicit terminator that our generic form spells out
            // (`transform.yield`, a registered op there) in its custom form, bare: it is that
            // generic op, which the op whose region it ends drops again.
            None if nresults == 0
                && inner.peek().is_none()
                && self
                    .registry
                    .ops()
                    .any(|d| d.implicit_terminator() == Some(name.as_str())) =>
            {
                return Ok(Operation::new(name).with_loc(loc));
            }
            None => return Err(self.err(&name_pair, format!("custom op '{name}' is unknown (the generic form \"{name}\"(...) is accepted for unregistered ops)"))),
        };
        let Some(format) = reg.format.as_ref() else {
            return Err(self.err(
                &name_pair,
                format!("'{name}' has no custom assembly; use the generic form"),
            ));
        };
        let isolated = reg.def.has_trait(Trait::IsolatedFromAbove);
        let mut toks = Vec::new();
        for t in inner {
            // A custom-form op ends at the end of its line (grammar.pest): a registered op's
            // name among its tokens is the next op written on the same line.
            if t.as_rule() == Rule::bare_id
                && t.as_str().contains('.')
                && self.registry.lookup(t.as_str()).is_some()
            {
                return Err(self.err(
                    &t,
                    format!("'{}' starts another op on the line of '{name}': a custom-form op ends at the end of its line; put each op on a line of its own", t.as_str()),
                ));
            }
            toks.push(self.token(t, isolated)?);
        }
        let parsed = parse_custom(&reg.def, format, &toks, end_loc)?;
        let mut op = Operation::new(name).with_loc(loc.clone());
        op.operands = parsed.operands.into_iter().flatten().collect();
        op.attrs = parsed.attrs;
        for (i, r) in parsed.regions.into_iter().enumerate() {
            op.regions.push(r.ok_or_else(|| {
                Diagnostic::error(
                    loc.clone(),
                    format!("missing region '{}'", reg.def.regions[i]),
                )
            })?);
        }
        let types = match parsed.result_types {
            Some(t) => t,
            None if nresults == 0 => vec![],
            None if reg.def.has_trait(Trait::SameOperandsAndResultType)
                && !op.operands.is_empty() =>
            {
                vec![op.operands[0].ty.clone(); nresults]
            }
            None => {
                return Err(Diagnostic::error(
                    loc,
                    format!("'{}' produces no results", reg.def.name),
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
        op.results = types.into_iter().map(|t| Value::new(t, None)).collect();
        Ok(op)
    }

    fn token(&mut self, pair: Pair<Rule>, isolated: bool) -> Result<Tok, Diagnostic> {
        self.descend(&pair)?;
        let result = self.token_inner(pair, isolated);
        self.ascend();
        result
    }

    fn token_inner(&mut self, pair: Pair<Rule>, isolated: bool) -> Result<Tok, Diagnostic> {
        let loc = self.loc(&pair);
        let text = pair.as_str();
        let kind = match pair.as_rule() {
            Rule::dict_attr_tok => {
                let d = pair
                    .into_inner()
                    .next()
                    .ok_or_else(|| Diagnostic::error(loc.clone(), "empty dictionary"))?;
                TokKind::Attr(Attribute::Dict(self.attr_dict(d)?))
            }
            Rule::region => TokKind::Region(self.region(pair, isolated)?),
            Rule::paren_group | Rule::square_group => {
                let open = if pair.as_rule() == Rule::paren_group {
                    '('
                } else {
                    '['
                };
                let mut items = Vec::new();
                for t in pair.into_inner() {
                    items.push(self.token(t, isolated)?);
                }
                TokKind::Group(open, items)
            }
            Rule::value_id => TokKind::Value(self.lookup_value(&pair)?),
            Rule::symbol_ref => TokKind::Symbol(self.symbol_path(pair)?),
            Rule::string_lit => TokKind::Str(self.string(&pair)?),
            Rule::type_tok => {
                let t = pair
                    .into_inner()
                    .next()
                    .ok_or_else(|| Diagnostic::error(loc.clone(), "empty type"))?;
                TokKind::Type(self.type_(t)?, text.to_string())
            }
            Rule::hash_attr => TokKind::Attr(self.hash_attr(pair)?),
            Rule::number => TokKind::Number(text.to_string()),
            Rule::arrow | Rule::punct => TokKind::Punct(text.to_string()),
            Rule::bare_id => TokKind::Keyword(text.to_string()),
            _ => return Err(self.err(&pair, "unexpected token")),
        };
        Ok(Tok { kind, loc })
    }

    fn region(&mut self, pair: Pair<Rule>, isolated: bool) -> Result<Region, Diagnostic> {
        let saved = if isolated {
            Some(std::mem::replace(&mut self.scopes, vec![HashMap::new()]))
        } else {
            None
        };
        self.scopes.push(HashMap::new());
        let result = self.region_body(pair);
        self.scopes.pop();
        if let Some(s) = saved {
            self.scopes = s;
        }
        result
    }

    fn region_body(&mut self, pair: Pair<Rule>) -> Result<Region, Diagnostic> {
        let mut region = Region::default();
        for part in pair.into_inner() {
            match part.as_rule() {
                Rule::entry_ops => {
                    let ops: Vec<Operation> = part
                        .into_inner()
                        .map(|o| self.operation(o))
                        .collect::<Result<_, _>>()?;
                    if !ops.is_empty() {
                        region.blocks.push(Block { args: vec![], ops });
                    }
                }
                Rule::block => {
                    let mut block = Block::default();
                    for b in part.into_inner() {
                        match b.as_rule() {
                            Rule::block_label => {
                                for arg in b.into_inner().filter(|a| a.as_rule() == Rule::block_arg)
                                {
                                    let mut ai = arg.clone().into_inner();
                                    let id = ai
                                        .next()
                                        .ok_or_else(|| self.err(&arg, "missing argument"))?;
                                    let ty = ai
                                        .next()
                                        .ok_or_else(|| self.err(&arg, "missing argument type"))?;
                                    let name = id.as_str()[1..].to_string();
                                    let v = Value::new(self.type_(ty)?, Some(&name));
                                    self.define(&id, &name, v.clone())?;
                                    block.args.push(v);
                                }
                            }
                            Rule::operation => block.ops.push(self.operation(b)?),
                            _ => {}
                        }
                    }
                    region.blocks.push(block);
                }
                _ => {}
            }
        }
        Ok(region)
    }

    fn symbol_path(&self, pair: Pair<Rule>) -> Result<Vec<String>, Diagnostic> {
        pair.into_inner()
            .map(|p| {
                if p.as_rule() == Rule::string_lit {
                    self.string(&p)
                } else {
                    Ok(p.as_str().to_string())
                }
            })
            .collect()
    }

    /// A verbatim `<...>` body of a dialect attribute or type; its brackets count towards the
    /// nesting limit like parsed ones.
    fn angle_body(&self, pair: Option<Pair<Rule>>) -> Result<Option<String>, Diagnostic> {
        let Some(b) = pair else { return Ok(None) };
        let text = b.as_str();
        let limit = MAX_NESTING.saturating_sub(self.depth.get());
        let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
        for (i, c) in text.char_indices() {
            match (c, in_str) {
                (_, true) if escaped => escaped = false,
                ('\\', true) => escaped = true,
                ('"', _) => in_str = !in_str,
                ('<', false) => depth += 1,
                ('>', false) => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > limit {
                return Err(Diagnostic::error(
                    self.file.location(b.as_span().start() + i),
                    format!("nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"),
                ));
            }
        }
        Ok(Some(text[1..text.len() - 1].to_string()))
    }

    fn hash_attr(&self, pair: Pair<Rule>) -> Result<Attribute, Diagnostic> {
        let mut inner = pair.into_inner();
        let full = inner
            .next()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let body = self.angle_body(inner.next())?;
        let (dialect, name) = full
            .split_once('.')
            .map_or((full.clone(), String::new()), |(d, n)| {
                (d.to_string(), n.to_string())
            });
        Ok(Attribute::Dialect {
            dialect,
            name,
            body,
        })
    }

    fn attr_dict(&mut self, pair: Pair<Rule>) -> Result<IndexMap<String, Attribute>, Diagnostic> {
        let mut out = IndexMap::new();
        for entry in pair.into_inner() {
            let mut ei = entry.clone().into_inner();
            let key_pair = ei.next().ok_or_else(|| self.err(&entry, "missing key"))?;
            let key = if key_pair.as_rule() == Rule::string_lit {
                self.string(&key_pair)?
            } else {
                key_pair.as_str().to_string()
            };
            let value = match ei.next() {
                Some(v) => self.attribute(v)?,
                None => Attribute::Unit,
            };
            if out.insert(key.clone(), value).is_some() {
                return Err(self.err(&key_pair, format!("duplicate attribute '{key}'")));
            }
        }
        Ok(out)
    }

    fn attribute(&mut self, pair: Pair<Rule>) -> Result<Attribute, Diagnostic> {
        self.descend(&pair)?;
        let result = self.attribute_inner(pair);
        self.ascend();
        result
    }

    fn attribute_inner(&mut self, pair: Pair<Rule>) -> Result<Attribute, Diagnostic> {
        let inner = pair
            .clone()
            .into_inner()
            .next()
            .ok_or_else(|| self.err(&pair, "empty attribute"))?;
        Ok(match inner.as_rule() {
            Rule::string_lit => Attribute::String(self.string(&inner)?),
            Rule::bool_lit => Attribute::Bool(inner.as_str() == "true"),
            Rule::unit_lit => Attribute::Unit,
            Rule::array_attr => Attribute::Array(
                inner
                    .into_inner()
                    .map(|a| self.attribute(a))
                    .collect::<Result<_, _>>()?,
            ),
            Rule::dict_attr => Attribute::Dict(self.attr_dict(inner)?),
            Rule::symbol_ref => Attribute::SymbolRef(self.symbol_path(inner)?),
            Rule::hash_attr => self.hash_attr(inner)?,
            Rule::typed_number => {
                let mut ti = inner.clone().into_inner();
                let num = ti
                    .next()
                    .ok_or_else(|| self.err(&inner, "missing number"))?;
                let ty = match ti.next() {
                    Some(t) => Some(self.type_(t)?),
                    None => None,
                };
                let text = num.as_str();
                // `0x1e5` is an integer: hex digits include `e`.
                let is_float_text = !is_int_literal(text);
                match ty {
                    // A hex literal of a float type is its bit pattern, as upstream reads it.
                    Some(t) if t.is_float() && is_hex_literal(text) => Attribute::Float {
                        value: float_from_hex(text, &t).map_err(|m| self.err(&num, m))?,
                        ty: t,
                    },
                    Some(t) if t.is_float() => Attribute::Float {
                        value: finite_float(text).map_err(|m| self.err(&num, m))?,
                        ty: t,
                    },
                    Some(t) if is_float_text => {
                        return Err(
                            self.err(&num, format!("float literal with non-float type '{t}'"))
                        )
                    }
                    Some(t) => Attribute::Integer {
                        value: int_attr(text).map_err(|m| self.err(&num, m))?,
                        ty: t,
                    },
                    None if is_float_text => Attribute::Float {
                        value: finite_float(text).map_err(|m| self.err(&num, m))?,
                        ty: Type::F64,
                    },
                    None => Attribute::int(int_attr(text).map_err(|m| self.err(&num, m))?),
                }
            }
            Rule::type_attr => {
                let t = inner
                    .into_inner()
                    .next()
                    .ok_or_else(|| self.err(&pair, "missing type"))?;
                Attribute::Type(self.type_(t)?)
            }
            _ => return Err(self.err(&inner, "unsupported attribute")),
        })
    }

    fn type_(&self, pair: Pair<Rule>) -> Result<Type, Diagnostic> {
        self.descend(&pair)?;
        let result = self.type_inner(pair);
        self.ascend();
        result
    }

    fn type_inner(&self, pair: Pair<Rule>) -> Result<Type, Diagnostic> {
        let pair = if pair.as_rule() == Rule::type_ {
            pair.into_inner()
                .next()
                .ok_or_else(|| Diagnostic::error(Location::Unknown, "empty type"))?
        } else {
            pair
        };
        let text = pair.as_str();
        Ok(match pair.as_rule() {
            Rule::scalar_type => match text {
                "bf16" => Type::BF16,
                "f16" => Type::F16,
                "f32" => Type::F32,
                "f64" => Type::F64,
                "index" => Type::Index,
                "none" => Type::None,
                _ => {
                    let (sign, digits) = if let Some(d) = text.strip_prefix("si") {
                        (Signedness::Signed, d)
                    } else if let Some(d) = text.strip_prefix("ui") {
                        (Signedness::Unsigned, d)
                    } else {
                        (Signedness::Signless, &text[1..])
                    };
                    let width: u32 = digits
                        .parse()
                        .map_err(|_| self.err(&pair, "bad integer width"))?;
                    if width == 0 || width > 1 << 16 {
                        return Err(self.err(&pair, "integer width out of range"));
                    }
                    Type::Integer {
                        width,
                        signedness: sign,
                    }
                }
            },
            Rule::tensor_type | Rule::memref_type | Rule::vector_type => {
                let mut shape = Vec::new();
                let mut elem = None;
                for p in pair.clone().into_inner() {
                    match p.as_rule() {
                        Rule::shape_prefix => {
                            for d in p.into_inner() {
                                shape.push(if d.as_str() == "?" {
                                    None
                                } else {
                                    Some(
                                        d.as_str()
                                            .parse::<u64>()
                                            .map_err(|_| self.err(&d, "dimension too large"))?,
                                    )
                                });
                            }
                        }
                        _ => elem = Some(self.type_(p)?),
                    }
                }
                let elem = Box::new(elem.ok_or_else(|| self.err(&pair, "missing element type"))?);
                match pair.as_rule() {
                    Rule::tensor_type => Type::Tensor { shape, elem },
                    Rule::memref_type => Type::MemRef { shape, elem },
                    _ => Type::Vector { shape, elem },
                }
            }
            Rule::tuple_type => Type::Tuple(
                pair.into_inner()
                    .map(|t| self.type_(t))
                    .collect::<Result<_, _>>()?,
            ),
            Rule::function_type => {
                let mut it = pair.clone().into_inner();
                let ins = it.next().ok_or_else(|| self.err(&pair, "missing inputs"))?;
                let inputs = ins
                    .into_inner()
                    .map(|t| self.type_(t))
                    .collect::<Result<_, _>>()?;
                let outs = it
                    .next()
                    .ok_or_else(|| self.err(&pair, "missing results"))?;
                let results = if outs.as_rule() == Rule::type_group {
                    outs.into_inner()
                        .map(|t| self.type_(t))
                        .collect::<Result<_, _>>()?
                } else {
                    vec![self.type_(outs)?]
                };
                Type::Function { inputs, results }
            }
            Rule::dialect_type => {
                let mut it = pair.into_inner();
                let full = it
                    .next()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_default();
                let body = self.angle_body(it.next())?;
                let (dialect, name) = full
                    .split_once('.')
                    .map_or((full.clone(), String::new()), |(d, n)| {
                        (d.to_string(), n.to_string())
                    });
                Type::Dialect {
                    dialect,
                    name,
                    body,
                }
            }
            Rule::type_group => {
                let items: Vec<Type> = pair
                    .clone()
                    .into_inner()
                    .map(|t| self.type_(t))
                    .collect::<Result<_, _>>()?;
                return Err(self.err(
                    &pair,
                    format!(
                        "a parenthesised type list ({} types) is not a type here",
                        items.len()
                    ),
                ));
            }
            _ => return Err(self.err(&pair, "expected a type")),
        })
    }
}

/// An integer attribute's value: attributes hold an i64, so a literal past it (decimal or hex;
/// upstream would take `0xFFFFFFFFFFFFFFFF` as the bit pattern -1) is out of range, never wrapped.
fn int_attr(text: &str) -> Result<i64, String> {
    parse_i64(text).map_err(|m| format!("integer out of range: {m}"))
}

/// A float literal's value; one that overflows to infinity (`1e309`) is refused, since the
/// printer could only write it back as an f64 hex bit pattern, which an f32 (or narrower) does
/// not read back (found by mercury-fuzz; regression
/// tools/mercury-fuzz/corpus/parser/float-overflow.mlir). `int_literal::float_from_hex` refuses
/// an infinity or a NaN spelled in hex for the same reason.
pub(crate) fn finite_float(text: &str) -> Result<f64, &'static str> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err("float literal out of range (not a finite f64)"),
        Err(_) => Err("bad float"),
    }
}

#[cfg(test)]
mod tests {
    use super::unquote;
    use crate::attributes::quote;

    #[test]
    fn escapes_decode_as_in_mlir() {
        for (lit, want) in [
            (r#""plain""#, "plain"),
            (r#""""#, ""),
            (r#""q\"b\\n\nt\t""#, "q\"b\\n\nt\t"),
            // `\XX`: one byte, either case of hex digit.
            (r#""\00\41q""#, "\0Aq"),
            (r#""a\09b""#, "a\tb"),
            (r#""\22\5C\0a\0A""#, "\"\\\n\n"),
            // Multi-byte UTF-8 spelled in escapes, or raw.
            (r#""\C3\a9 é""#, "é é"),
            (r#""\E2\80\A8""#, "\u{2028}"),
            // A hex escape takes two digits exactly; the next one is text.
            (r#""\414""#, "A4"),
            // A raw NUL and a raw tab are text, as in MLIR.
            ("\"a\0\tb\"", "a\0\tb"),
        ] {
            assert_eq!(unquote(lit).as_deref(), Ok(want), "{lit}");
        }
    }

    #[test]
    fn bad_escapes_are_errors_at_the_backslash() {
        for (lit, at, want) in [
            (r#""x\qy""#, 2, "unknown escape in string literal"),
            (r#""\r""#, 1, "unknown escape"),
            (r#""\0""#, 1, "unknown escape"),
            (r#""\4g""#, 1, "unknown escape"),
            (r#""ab\""#, 3, "unknown escape"),
            ("\"a\\\nb\"", 2, "unknown escape"),
            ("\"a\u{b}b\"", 2, "expected '\"' in string literal"),
            ("\"a\u{c}b\"", 2, "expected '\"' in string literal"),
            // Bytes that are not UTF-8: located at the escape that breaks it.
            (r#""ok\FF""#, 3, "invalid UTF-8 in string literal"),
            (r#""é\C3(""#, 3, "invalid UTF-8"),
            (r#""\E2\80""#, 1, "invalid UTF-8"),
            (r#""a\80""#, 2, "invalid UTF-8"),
        ] {
            let err = unquote(lit).expect_err(lit);
            assert_eq!(err.0, at, "{lit}: {}", err.1);
            assert!(err.1.contains(want), "{lit}: {}", err.1);
        }
    }

    /// Whatever a string holds, its printed literal decodes to it.
    #[test]
    fn quote_then_unquote_is_identity() {
        let mut all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        all.push_str("\u{2028}\u{2029}\u{200b}\u{202e}\u{2066}\u{feff}\u{10ffff}日本");
        for s in [
            all.as_str(),
            "",
            "\"",
            "\\",
            "\\\\\"",
            "a\tb",
            "\0",
            "\u{7f}",
        ] {
            let q = quote(s);
            assert_eq!(unquote(&q).as_deref(), Ok(s), "{q}");
            // Nothing unprintable is written raw.
            assert!(
                !q.chars()
                    .any(|c| c.is_control() || (c.is_whitespace() && c != ' ')),
                "{q:?}"
            );
        }
    }
}
