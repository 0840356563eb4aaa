//! Builds IR from MLIR's textual syntax, as upstream's `mlir/lib/AsmParser` reads it: a
//! recursive-descent parser over the on-demand [`Lexer`](crate::syntax::lexer::Lexer). A
//! custom-form op is read by its own syntax (a registered op's assembly hook or declarative
//! format), so it ends where that syntax ends, on its line or several. Errors are located
//! diagnostics; no input panics.
//!
//! The parser's parts: this file (state, the file's top level, aliases and file metadata, SSA
//! names and their scopes), `ops.rs` (operations, regions, blocks), `attrs.rs` (attributes),
//! `types.rs` (types), `locs.rs` (locations), `affine.rs` (affine maps and sets), `text.rs`
//! (string literals and the nesting bound).

mod affine;
mod attrs;
mod locs;
mod ops;
mod text;
mod types;

pub(crate) use ops::RegionArg;
pub use text::{finite_float, unquote, UnquoteError, MAX_NESTING};

use crate::attributes::Attribute;
use crate::diag::{Diagnostic, Location, SourceFile};
use crate::ir::{Operation, Value};
use crate::registry::Registry;
use crate::syntax::lexer::{Lexer, Token, TokenKind};
use crate::types::Type;
use std::collections::HashMap;
use std::sync::Arc;

/// The pest grammar that remains: integer literals and pass pipelines (`grammar.pest`).
#[derive(pest_derive::Parser)]
#[grammar = "syntax/grammar.pest"]
pub struct MlirGrammar;

/// Parses a whole buffer into a `builtin.module` (top-level ops without a module are wrapped).
pub fn parse_source(registry: &Registry, file: &Arc<SourceFile>) -> Result<Operation, Diagnostic> {
    // Some editors start a UTF-8 file with a byte-order mark: not part of the text (and not a
    // column either, as editors show it).
    if let Some(rest) = file.text.strip_prefix('\u{feff}') {
        let unmarked = SourceFile::with_first_line(file.name.as_str(), rest, file.first_line);
        return parse_source(registry, &unmarked);
    }
    if let Some(at) = text::too_deep(
        &file.text,
        file.text.len(),
        text::BRACKETS_PER_LEVEL * MAX_NESTING,
    ) {
        return Err(text::nesting_error(file, at));
    }
    let mut p = Parser::new(registry, file);
    p.parse_file()
}

/// Parses text given a name for diagnostics.
pub fn parse_str(registry: &Registry, name: &str, text: &str) -> Result<Operation, Diagnostic> {
    parse_source(registry, &SourceFile::new(name, text))
}

/// What an alias `#name = ...` stands for.
#[derive(Debug, Clone)]
pub(crate) enum AliasValue {
    Attr(Attribute),
    Loc(Location),
}

/// One SSA name's values (a result group `%x:2` has two) and where it was defined.
#[derive(Debug)]
struct NameEntry {
    values: Vec<Option<Value>>,
    at: Location,
}

/// The SSA names of one isolated-from-above region (and the regions nested in it that are not
/// isolated): defined values, forward references, and which names each open region defined.
#[derive(Debug, Default)]
struct IsolatedScope {
    names: HashMap<String, NameEntry>,
    /// `(name, result number)` used before its definition: the placeholder value (whose id
    /// the definition takes over) and where it was first used.
    forward: HashMap<(String, usize), (Value, Location)>,
    /// The names each open region defined, innermost last: they go out of scope with it.
    region_defs: Vec<Vec<String>>,
}

/// A `%name` or `%name#N` read but not yet resolved to a value (its type may come later).
#[derive(Debug, Clone)]
pub(crate) struct OperandUse {
    pub name: String,
    pub number: usize,
    pub loc: Location,
}

/// The parser.
pub(crate) struct Parser<'a> {
    pub(crate) file: Arc<SourceFile>,
    pub(crate) text: &'a str,
    pub(crate) lex: Lexer<'a>,
    pub(crate) tok: Token,
    pub(crate) registry: &'a Registry,
    aliases: HashMap<String, AliasValue>,
    type_aliases: HashMap<String, Type>,
    /// Top-level `#name = loc(...)` definitions found before parsing, by name: a location
    /// alias may be used before it is defined (mlir-opt prints them at the end of the file).
    loc_alias_defs: HashMap<String, usize>,
    scopes: Vec<IsolatedScope>,
    /// Dialects whose ops may be written without their prefix here (`func` inside a
    /// `func.func`), innermost last.
    pub(crate) default_dialects: Vec<&'static str>,
    /// Current nesting (see `MAX_NESTING`).
    pub(crate) depth: usize,
    /// Ids `distinct[N]` took, by the number written: one number is one attribute.
    pub(crate) distinct: HashMap<u64, Attribute>,
    /// The blocks of the region being parsed.
    pub(crate) blocks: ops::BlockTable,
}

impl<'a> Parser<'a> {
    fn new(registry: &'a Registry, file: &'a Arc<SourceFile>) -> Parser<'a> {
        let mut lex = Lexer::new(&file.text);
        let tok = lex.lex();
        Parser {
            file: file.clone(),
            text: &file.text,
            lex,
            tok,
            registry,
            aliases: HashMap::new(),
            type_aliases: HashMap::new(),
            loc_alias_defs: HashMap::new(),
            scopes: vec![IsolatedScope::default()],
            default_dialects: Vec::new(),
            depth: 0,
            distinct: HashMap::new(),
            blocks: ops::BlockTable::default(),
        }
    }

    // ---- tokens --------------------------------------------------------------------------

    /// The current token's text.
    pub(crate) fn tok_text(&self) -> &'a str {
        self.tok.text(self.text)
    }
    pub(crate) fn is(&self, k: TokenKind) -> bool {
        self.tok.kind == k
    }
    /// Whether the current token is the bare word `w`.
    pub(crate) fn is_word(&self, w: &str) -> bool {
        self.tok.kind == TokenKind::BareIdent && self.tok_text() == w
    }
    pub(crate) fn bump(&mut self) -> Token {
        let t = self.tok;
        self.tok = self.lex.lex();
        t
    }
    /// Re-lexes from byte `pos`.
    pub(crate) fn reset_to(&mut self, pos: usize) {
        self.lex.reset(pos);
        self.tok = self.lex.lex();
    }
    /// Whether `f` would succeed here; the token stream stays where it is either way.
    pub(crate) fn lookahead_ok<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, Diagnostic>,
    ) -> bool {
        let (tok, pos, depth) = (self.tok, self.lex.pos(), self.depth);
        let ok = f(self).is_ok();
        self.lex.reset(pos);
        self.tok = tok;
        self.depth = depth;
        ok
    }
    pub(crate) fn eat(&mut self, k: TokenKind) -> bool {
        if self.is(k) {
            self.bump();
            true
        } else {
            false
        }
    }
    pub(crate) fn eat_word(&mut self, w: &str) -> bool {
        if self.is_word(w) {
            self.bump();
            true
        } else {
            false
        }
    }
    pub(crate) fn loc_at(&self, offset: usize) -> Location {
        self.file.location(offset)
    }
    /// The current token's location.
    pub(crate) fn here(&self) -> Location {
        self.loc_at(self.tok.start)
    }
    /// An error about the current token being the wrong one (a lexical error says what it
    /// is). As upstream's `emitWrongTokenError`, it points at the end of the text before the
    /// token when the token starts a line (past blank lines and comments): where what is
    /// missing should have been.
    pub(crate) fn err(&self, msg: impl Into<String>) -> Diagnostic {
        if self.tok.kind == TokenKind::Error {
            return Diagnostic::error(self.loc_at(self.lex.error_at), self.lex.error);
        }
        Diagnostic::error(self.loc_at(self.wrong_token_offset()), msg)
    }

    /// An error at the current token itself (at end of input: at the last character).
    pub(crate) fn err_here(&self, msg: impl Into<String>) -> Diagnostic {
        if self.tok.kind == TokenKind::Error {
            return Diagnostic::error(self.loc_at(self.lex.error_at), self.lex.error);
        }
        let mut at = self.tok.start;
        if self.tok.kind == TokenKind::Eof {
            at = at.saturating_sub(1);
        }
        Diagnostic::error(self.loc_at(at), msg)
    }

    fn wrong_token_offset(&self) -> usize {
        let mut at = self.tok.start;
        if self.tok.kind == TokenKind::Eof {
            at = at.saturating_sub(1);
        }
        let original = at;
        let b = self.text.as_bytes();
        let mut end = at;
        loop {
            while end > 0 && matches!(b[end - 1], b' ' | b'\t') {
                end -= 1;
            }
            if end == 0 {
                return original;
            }
            if !matches!(b[end - 1], b'\n' | b'\r') {
                return end;
            }
            end -= 1;
            let line_start = self.text[..end].rfind(['\n', '\r']).map_or(0, |i| i + 1);
            if let Some(c) = self.text[line_start..end].find("//") {
                end = line_start + c;
            }
        }
    }
    /// Where the previous token ended (errors about something missing at the end of a line
    /// point there, as upstream's do).
    pub(crate) fn err_at(&self, offset: usize, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::error(self.loc_at(offset), msg)
    }
    pub(crate) fn expect(&mut self, k: TokenKind, what: &str) -> Result<Token, Diagnostic> {
        if self.is(k) {
            Ok(self.bump())
        } else {
            Err(self.err(format!("expected {what}")))
        }
    }
    pub(crate) fn expect_word(&mut self, w: &str) -> Result<(), Diagnostic> {
        if self.eat_word(w) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{w}'")))
        }
    }

    /// Enters one nesting level; an error past `MAX_NESTING`.
    pub(crate) fn descend(&mut self) -> Result<(), Diagnostic> {
        if self.depth >= MAX_NESTING {
            return Err(self.err_here(format!(
                "nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"
            )));
        }
        self.depth += 1;
        Ok(())
    }
    pub(crate) fn ascend(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Parses a comma-separated list closed by `close` (the opening bracket already read).
    pub(crate) fn comma_list(
        &mut self,
        close: TokenKind,
        close_text: &str,
        mut item: impl FnMut(&mut Self) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        if self.eat(close) {
            return Ok(());
        }
        loop {
            item(self)?;
            if self.eat(TokenKind::Comma) {
                continue;
            }
            if self.eat(close) {
                return Ok(());
            }
            return Err(self.err(format!("expected ',' or '{close_text}'")));
        }
    }

    /// The decoded value of the current string token (which it consumes).
    pub(crate) fn string_value(&mut self) -> Result<String, Diagnostic> {
        let t = self.tok;
        let s = unquote(t.text(self.text)).map_err(|(at, msg)| self.err_at(t.start + at, msg))?;
        self.bump();
        Ok(s)
    }

    // ---- the file ------------------------------------------------------------------------

    fn parse_file(&mut self) -> Result<Operation, Diagnostic> {
        self.find_loc_aliases();
        let mut ops = Vec::new();
        loop {
            match self.tok.kind {
                TokenKind::Eof => break,
                TokenKind::HashIdent if self.next_is_equal() => self.attribute_alias_def()?,
                TokenKind::ExclaimIdent if self.next_is_equal() => self.type_alias_def()?,
                TokenKind::FileMetadataBegin => self.file_metadata()?,
                _ => ops.push(self.operation()?),
            }
        }
        // The top level is the implicit module's one block, where no block can be defined: a
        // successor there names none (it used to be taken for the entry block, refused
        // unlocated as a predecessor of it).
        if let Some(at) = self.blocks.first_undefined() {
            return Err(Diagnostic::error(at, "reference to an undefined block"));
        }
        self.finish_scope()?;
        if ops.len() == 1 && ops[0].name == "builtin.module" {
            return Ok(ops.pop().expect("one op"));
        }
        // The implicit module is at line 0 of the file, as upstream places it.
        let mut m = crate::ir::module(ops);
        m.loc = Location::FileLineCol {
            filename: self.file.name.clone(),
            line: 0,
            col: Some(0),
            end_line: None,
            end_col: None,
        };
        Ok(m)
    }

    /// Whether the token after the current one is `=`.
    fn next_is_equal(&self) -> bool {
        let mut l = self.lex.clone();
        l.lex().kind == TokenKind::Equal
    }

    /// Records where each top-level `#name = loc(` alias is defined, so that a location may
    /// name it before its definition.
    fn find_loc_aliases(&mut self) {
        let mut l = Lexer::new(self.text);
        let mut depth = 0usize;
        let mut prev: Option<Token> = None;
        let mut prev2: Option<Token> = None;
        loop {
            let t = l.lex();
            match t.kind {
                TokenKind::Eof => break,
                TokenKind::LParen | TokenKind::LSquare | TokenKind::LBrace | TokenKind::Less => {
                    depth += 1
                }
                TokenKind::RParen | TokenKind::RSquare | TokenKind::RBrace | TokenKind::Greater => {
                    depth = depth.saturating_sub(1)
                }
                TokenKind::BareIdent if t.text(self.text) == "loc" && depth == 0 => {
                    if let (Some(eq), Some(name)) = (prev, prev2) {
                        if eq.kind == TokenKind::Equal && name.kind == TokenKind::HashIdent {
                            self.loc_alias_defs
                                .insert(name.text(self.text)[1..].to_string(), name.start);
                        }
                    }
                }
                _ => {}
            }
            prev2 = prev;
            prev = Some(t);
        }
    }

    fn attribute_alias_def(&mut self) -> Result<(), Diagnostic> {
        let name_tok = self.bump();
        let name = name_tok.text(self.text)[1..].to_string();
        if name.contains('.') {
            return Err(self.err_at(
                name_tok.start,
                "attribute names with a '.' are reserved for dialect-defined names",
            ));
        }
        // A location alias read ahead (it was used before this definition) is defined.
        let read_ahead = self.loc_alias_defs.get(&name) == Some(&usize::MAX);
        if self.aliases.contains_key(&name) && !read_ahead {
            return Err(self.err_at(
                name_tok.start,
                format!("redefinition of attribute alias id '{name}'"),
            ));
        }
        if read_ahead {
            self.loc_alias_defs.remove(&name);
        }
        self.bump(); // '='
        let value = if self.is_word("loc") {
            AliasValue::Loc(self.location()?)
        } else {
            AliasValue::Attr(self.attribute()?)
        };
        self.aliases.insert(name, value);
        Ok(())
    }

    fn type_alias_def(&mut self) -> Result<(), Diagnostic> {
        let name_tok = self.bump();
        let name = name_tok.text(self.text)[1..].to_string();
        if name.contains('.') {
            return Err(self.err_at(
                name_tok.start,
                "type names with a '.' are reserved for dialect-defined names",
            ));
        }
        if self.type_aliases.contains_key(&name) {
            return Err(self.err_at(
                name_tok.start,
                format!("redefinition of type alias id '{name}'"),
            ));
        }
        self.bump(); // '='
        let ty = self.type_()?;
        self.type_aliases.insert(name, ty);
        Ok(())
    }

    /// An attribute alias's value.
    pub(crate) fn alias(&mut self, name: &str) -> Option<AliasValue> {
        if let Some(v) = self.aliases.get(name) {
            return Some(v.clone());
        }
        // A location alias defined further down: parse its definition now.
        let at = *self
            .loc_alias_defs
            .get(name)
            .filter(|&&at| at != usize::MAX)?;
        // Marked as read ahead: its definition is met again later.
        self.loc_alias_defs.insert(name.to_string(), usize::MAX);
        let (saved_tok, saved_pos) = (self.tok, self.lex.pos());
        self.reset_to(at);
        self.bump(); // the name
        self.bump(); // '='
        let value = self.location().ok().map(AliasValue::Loc);
        self.lex.reset(saved_pos);
        self.tok = saved_tok;
        if let Some(v) = &value {
            self.aliases.insert(name.to_string(), v.clone());
        }
        value
    }

    pub(crate) fn type_alias(&self, name: &str) -> Option<Type> {
        self.type_aliases.get(name).cloned()
    }

    /// `{-# key: {...}, ... #-}`: the file's metadata (dialect and external resources),
    /// checked as upstream checks it; its content is not kept.
    fn file_metadata(&mut self) -> Result<(), Diagnostic> {
        self.bump();
        loop {
            if self.eat(TokenKind::FileMetadataEnd) {
                return Ok(());
            }
            if !self.is(TokenKind::BareIdent) {
                return Err(self.err_here("expected identifier key in file metadata dictionary"));
            }
            let key_tok = self.bump();
            let key = key_tok.text(self.text);
            self.expect(TokenKind::Colon, "':'")?;
            match key {
                "dialect_resources" => self.resource_section(true)?,
                "external_resources" => self.resource_section(false)?,
                _ => {
                    return Err(self.err_at(
                        key_tok.start,
                        format!("unknown key '{key}' in file metadata dictionary"),
                    ))
                }
            }
            if !self.eat(TokenKind::Comma) && !self.is(TokenKind::FileMetadataEnd) {
                return Err(self.err("expected ',' or '#-}'"));
            }
        }
    }

    fn resource_section(&mut self, dialect: bool) -> Result<(), Diagnostic> {
        self.expect(TokenKind::LBrace, "'{'")?;
        self.comma_list(TokenKind::RBrace, "}", |p| {
            if !p.is(TokenKind::BareIdent) {
                return Err(p.err_here("expected identifier key for 'resource' entry"));
            }
            let owner_tok = p.bump();
            let owner = owner_tok.text(p.text).to_string();
            p.expect(TokenKind::Colon, "':'")?;
            p.expect(TokenKind::LBrace, "'{'")?;
            if dialect && !p.registry.dialect_registered(&owner) {
                return Err(p.err_at(owner_tok.start, format!("dialect '{owner}' is unknown")));
            }
            p.comma_list(TokenKind::RBrace, "}", |p| {
                if !p.is(TokenKind::BareIdent) && !p.is(TokenKind::String) {
                    return Err(p.err_here("expected identifier key for 'resource' entry"));
                }
                let key_tok = p.bump();
                let key = key_tok.text(p.text).to_string();
                p.expect(TokenKind::Colon, "':'")?;
                let value_tok = p.tok;
                match value_tok.kind {
                    TokenKind::String => {
                        let v = p.string_value()?;
                        if dialect && owner == "builtin" {
                            check_blob(&v).map_err(|m| p.err_at(value_tok.start, m))?;
                        }
                    }
                    TokenKind::BareIdent
                        if matches!(value_tok.text(p.text), "true" | "false") && !dialect =>
                    {
                        p.bump();
                    }
                    _ if dialect && owner == "builtin" => {
                        return Err(p.err_here(format!("expected hex string blob for key '{key}'")))
                    }
                    _ => {
                        p.bump();
                    }
                }
                if dialect && owner != "builtin" {
                    return Err(p.err_at(
                        key_tok.start,
                        format!("unknown 'resource' key '{key}' for dialect '{owner}'"),
                    ));
                }
                Ok(())
            })
        })
    }

    // ---- SSA names -----------------------------------------------------------------------

    fn scope(&mut self) -> &mut IsolatedScope {
        self.scopes.last_mut().expect("a scope")
    }

    /// Opens a region's name scope; `isolated` regions see no names from outside.
    pub(crate) fn push_scope(&mut self, isolated: bool) {
        if isolated {
            self.scopes.push(IsolatedScope::default());
        }
        self.scope().region_defs.push(Vec::new());
    }

    /// Closes a region's name scope: its names go; an isolated one's forward references must
    /// all have been defined.
    pub(crate) fn pop_scope(&mut self, isolated: bool) -> Result<(), Diagnostic> {
        let scope = self.scope();
        if let Some(defs) = scope.region_defs.pop() {
            for n in defs {
                scope.names.remove(&n);
            }
        }
        if isolated {
            self.finish_scope()?;
            self.scopes.pop();
        }
        Ok(())
    }

    /// Fails on the first forward reference of the current isolated scope left undefined.
    fn finish_scope(&mut self) -> Result<(), Diagnostic> {
        let scope = self.scope();
        let first = scope
            .forward
            .iter()
            .min_by_key(|(_, (_, l))| (l.line(), l.to_string()));
        if let Some(((name, n), (_, loc))) = first {
            let shown = if *n > 0 {
                format!("{name}#{n}")
            } else {
                name.clone()
            };
            return Err(Diagnostic::error(
                loc.clone(),
                format!("use of undeclared SSA value name '%{shown}'"),
            ));
        }
        Ok(())
    }

    /// Reads `%name` or `%name#N`.
    pub(crate) fn operand_use(&mut self) -> Result<OperandUse, Diagnostic> {
        if !self.is(TokenKind::PercentIdent) {
            return Err(self.err("expected SSA operand"));
        }
        let t = self.bump();
        let name = t.text(self.text)[1..].to_string();
        let mut number = 0;
        if self.is(TokenKind::HashIdent) && self.tok.start == t.end {
            let n = &self.tok_text()[1..];
            number = n
                .parse::<usize>()
                .map_err(|_| self.err("invalid SSA value result number"))?;
            self.bump();
        }
        Ok(OperandUse {
            name,
            number,
            loc: self.loc_at(t.start),
        })
    }

    /// The value an operand names, given the type the use says it has: a defined value (whose
    /// type must be that one) or a forward reference.
    pub(crate) fn resolve(&mut self, u: &OperandUse, ty: &Type) -> Result<Value, Diagnostic> {
        if let Some(v) = self.lookup(u)? {
            if &v.ty != ty {
                return Err(Diagnostic::error(
                    u.loc.clone(),
                    format!(
                        "use of value '%{}' expects different type than prior uses: '{ty}' vs '{}'",
                        u.name, v.ty
                    ),
                ));
            }
            return Ok(v);
        }
        let key = (u.name.clone(), u.number);
        if let Some((v, _)) = self.scope().forward.get(&key) {
            let v = v.clone();
            if &v.ty != ty {
                return Err(Diagnostic::error(
                    u.loc.clone(),
                    format!(
                        "use of value '%{}' expects different type than prior uses: '{ty}' vs '{}'",
                        u.name, v.ty
                    ),
                ));
            }
            return Ok(v);
        }
        let v = Value::new(ty.clone(), Some(&u.name));
        self.scope().forward.insert(key, (v.clone(), u.loc.clone()));
        Ok(v)
    }

    /// A defined value of this name, if there is one (for operands whose type the syntax does
    /// not give).
    pub(crate) fn lookup(&mut self, u: &OperandUse) -> Result<Option<Value>, Diagnostic> {
        let Some(e) = self.scope().names.get(&u.name) else {
            return Ok(None);
        };
        if u.number >= e.values.len() {
            return Err(Diagnostic::error(
                u.loc.clone(),
                format!(
                    "reference to invalid result number '{}' of '%{}' (it has {})",
                    u.number,
                    u.name,
                    e.values.len()
                ),
            ));
        }
        Ok(e.values[u.number].clone())
    }

    /// Where `%name` was defined, or else first used, if it was (upstream's
    /// `getReferenceLoc`).
    pub(crate) fn reference_loc(&mut self, name: &str) -> Option<Location> {
        let scope = self.scope();
        if let Some(e) = scope.names.get(name) {
            return Some(e.at.clone());
        }
        scope
            .forward
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|(_, (_, l))| l.clone())
            .min_by_key(|l| (l.line(), l.to_string()))
    }

    /// Defines `%name` as `values` (a result group when more than one); a forward reference
    /// to it takes the definition's value. `at` locates errors.
    pub(crate) fn define(
        &mut self,
        name: &str,
        values: &mut [Value],
        at: &Location,
    ) -> Result<(), Diagnostic> {
        if let Some(prev) = self.scope().names.get(name) {
            return Err(Diagnostic::error(
                at.clone(),
                format!("redefinition of SSA value '%{name}'"),
            )
            .with_note(prev.at.clone(), "previously defined here"));
        }
        for (i, v) in values.iter_mut().enumerate() {
            if let Some((fwd, used_at)) = self.scope().forward.remove(&(name.to_string(), i)) {
                if fwd.ty != v.ty {
                    let shown = if i > 0 {
                        format!("{name}#{i}")
                    } else {
                        name.to_string()
                    };
                    return Err(Diagnostic::error(
                        at.clone(),
                        format!("definition of SSA value '%{shown}' has type '{}'", v.ty),
                    )
                    .with_note(
                        used_at,
                        format!("previously used here with type '{}'", fwd.ty),
                    ));
                }
                v.id = fwd.id;
            }
        }
        let scope = self.scope();
        scope.names.insert(
            name.to_string(),
            NameEntry {
                values: values.iter().cloned().map(Some).collect(),
                at: at.clone(),
            },
        );
        if let Some(defs) = scope.region_defs.last_mut() {
            defs.push(name.to_string());
        }
        // A result number past the group that was used before the definition.
        let bad = scope
            .forward
            .iter()
            .find(|((n, k), _)| n == name && *k >= values.len())
            .map(|((_, k), (_, l))| (*k, l.clone()));
        if let Some((k, l)) = bad {
            return Err(Diagnostic::error(
                l,
                format!("reference to invalid result number '{k}' of '%{name}'"),
            ));
        }
        Ok(())
    }
}

/// Checks a builtin resource blob: `"0x"`, then 8 hex digits of little-endian alignment
/// (a power of two), then the data in hex.
fn check_blob(v: &str) -> Result<(), String> {
    let Some(hex) = v.strip_prefix("0x") else {
        return Err("expected hex string blob".into());
    };
    if hex.len() % 2 != 0 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("expected hex string blob".into());
    }
    if hex.len() < 8 {
        return Err("expected hex string blob to contain an alignment".into());
    }
    let bytes: Vec<u8> = (0..4)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect();
    let align = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if !align.is_power_of_two() {
        return Err(format!(
            "expected hex string blob alignment to be a power of 2, got {align}"
        ));
    }
    Ok(())
}
