//! Tokens of a custom-form operation body, as the lexer hands them to an op's format.

use crate::attributes::Attribute;
use crate::diag::Location;
use crate::ir::{Region, Value};
use crate::types::Type;

#[derive(Debug, Clone)]
pub enum TokKind {
    Value(Value),
    Symbol(Vec<String>),
    Str(String),
    Number(String),
    Keyword(String),
    Punct(String),
    /// A type; `text` is its spelling (a keyword like `index` lexes as a type).
    Type(Type, String),
    /// `#dialect.attr<...>` or an attribute dictionary.
    Attr(Attribute),
    Group(char, Vec<Tok>),
    Region(Region),
}

#[derive(Debug, Clone)]
pub struct Tok {
    pub kind: TokKind,
    pub loc: Location,
}

impl Tok {
    /// Spelling of a keyword-like token (keyword, punctuation, or a type written as a word).
    pub fn word(&self) -> Option<&str> {
        match &self.kind {
            TokKind::Keyword(s) | TokKind::Punct(s) => Some(s),
            TokKind::Type(_, text) => Some(text),
            _ => None,
        }
    }
    /// Short description for diagnostics.
    pub fn describe(&self) -> String {
        match &self.kind {
            TokKind::Value(v) => format!("value '%{}'", v.name.as_deref().unwrap_or("?")),
            TokKind::Symbol(p) => format!("symbol '@{}'", p.join("::@")),
            TokKind::Str(s) => format!("string \"{s}\""),
            TokKind::Number(n) => format!("number '{n}'"),
            TokKind::Keyword(k) => format!("'{k}'"),
            TokKind::Punct(p) => format!("'{p}'"),
            TokKind::Type(_, t) => format!("type '{t}'"),
            TokKind::Attr(a) => format!("attribute '{a}'"),
            TokKind::Group(c, _) => format!("'{c}' group"),
            TokKind::Region(_) => "region".into(),
        }
    }
}
