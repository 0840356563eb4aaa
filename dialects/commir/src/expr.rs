//! Index expressions of loads, stores and reductions: affine sums and products of loop axes
//! and constants, optionally taken modulo a constant, e.g. `(@j + @i) mod 8`.
//!
//! Custom syntax writes axes as symbols (`@j`); the generic form stores the same expression as
//! a string with bare names (`"(j + i) mod 8"`).

use mercury_ir::syntax::int_literal::{parse_i64, uint_literal_prefix};
use mercury_ir::syntax::tokens::{Tok, TokKind};
use std::collections::HashMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IndexExpr {
    Axis(String),
    Const(i64),
    Add(Box<IndexExpr>, Box<IndexExpr>),
    Mul(Box<IndexExpr>, Box<IndexExpr>),
    Mod(Box<IndexExpr>, i64),
}

#[derive(Debug, Clone, PartialEq)]
enum ETok {
    Ident(String),
    Num(i64),
    Plus,
    Star,
    LParen,
    RParen,
    Mod,
}

impl IndexExpr {
    pub fn axis(name: &str) -> IndexExpr {
        IndexExpr::Axis(name.to_string())
    }
    /// `(self + by + offset) mod m` (`offset` 0 gives [`IndexExpr::shifted`]).
    pub fn shifted_by(self, by: &str, offset: i64, m: i64) -> IndexExpr {
        let sum = IndexExpr::Add(Box::new(self), Box::new(IndexExpr::axis(by)));
        let sum = if offset == 0 {
            sum
        } else {
            IndexExpr::Add(Box::new(sum), Box::new(IndexExpr::Const(offset)))
        };
        IndexExpr::Mod(Box::new(sum), m)
    }

    /// `(self + by) mod m`.
    pub fn shifted(self, by: &str, m: i64) -> IndexExpr {
        IndexExpr::Mod(
            Box::new(IndexExpr::Add(
                Box::new(self),
                Box::new(IndexExpr::axis(by)),
            )),
            m,
        )
    }

    /// Axes the expression mentions, in order of appearance.
    pub fn axes(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_axes(&mut out);
        out
    }
    fn collect_axes<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            IndexExpr::Axis(a) => {
                if !out.contains(&a.as_str()) {
                    out.push(a)
                }
            }
            IndexExpr::Const(_) => {}
            IndexExpr::Add(a, b) | IndexExpr::Mul(a, b) => {
                a.collect_axes(out);
                b.collect_axes(out);
            }
            IndexExpr::Mod(a, _) => a.collect_axes(out),
        }
    }

    /// The single axis this expression is, if it is a bare axis.
    pub fn as_axis(&self) -> Option<&str> {
        match self {
            IndexExpr::Axis(a) => Some(a),
            _ => None,
        }
    }

    /// Evaluates with axis values; `None` when an axis is unbound or a modulus is not positive.
    pub fn eval(&self, env: &HashMap<String, i64>) -> Option<i64> {
        Some(match self {
            IndexExpr::Axis(a) => *env.get(a)?,
            IndexExpr::Const(c) => *c,
            IndexExpr::Add(a, b) => a.eval(env)?.checked_add(b.eval(env)?)?,
            IndexExpr::Mul(a, b) => a.eval(env)?.checked_mul(b.eval(env)?)?,
            IndexExpr::Mod(a, m) => {
                if *m <= 0 {
                    return None;
                }
                a.eval(env)?.rem_euclid(*m)
            }
        })
    }

    /// Renames axes.
    pub fn rename(&self, f: &dyn Fn(&str) -> IndexExpr) -> IndexExpr {
        match self {
            IndexExpr::Axis(a) => f(a),
            IndexExpr::Const(c) => IndexExpr::Const(*c),
            IndexExpr::Add(a, b) => IndexExpr::Add(Box::new(a.rename(f)), Box::new(b.rename(f))),
            IndexExpr::Mul(a, b) => IndexExpr::Mul(Box::new(a.rename(f)), Box::new(b.rename(f))),
            IndexExpr::Mod(a, m) => IndexExpr::Mod(Box::new(a.rename(f)), *m),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, sym: bool, prec: u8) -> fmt::Result {
        match self {
            IndexExpr::Axis(a) => {
                if sym {
                    write!(f, "{}", axis_ref(a))
                } else if is_bare(a) {
                    write!(f, "{a}")
                } else {
                    write!(f, "{}", mercury_ir::attributes::quote(a))
                }
            }
            IndexExpr::Const(c) => write!(f, "{c}"),
            IndexExpr::Add(a, b) => {
                if prec > 1 {
                    write!(f, "(")?;
                }
                a.write(f, sym, 1)?;
                write!(f, " + ")?;
                b.write(f, sym, 2)?;
                if prec > 1 {
                    write!(f, ")")?;
                }
                Ok(())
            }
            IndexExpr::Mul(a, b) => {
                if prec > 2 {
                    write!(f, "(")?;
                }
                a.write(f, sym, 2)?;
                write!(f, " * ")?;
                b.write(f, sym, 3)?;
                if prec > 2 {
                    write!(f, ")")?;
                }
                Ok(())
            }
            IndexExpr::Mod(a, m) => {
                if prec > 2 {
                    write!(f, "(")?;
                }
                a.write(f, sym, 2)?;
                write!(f, " mod {m}")?;
                if prec > 2 {
                    write!(f, ")")?;
                }
                Ok(())
            }
        }
    }

    /// Custom-syntax spelling (`(@j + @i) mod 8`).
    pub fn to_custom(&self) -> String {
        struct W<'a>(&'a IndexExpr);
        impl fmt::Display for W<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.write(f, true, 0)
            }
        }
        W(self).to_string()
    }

    /// Parses the generic (string) spelling.
    pub fn parse_text(s: &str) -> Result<IndexExpr, String> {
        let mut toks = Vec::new();
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                // An integer literal as the IR's grammar lexes one: `16` or `0x10`.
                let word: String = chars[i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                let n = uint_literal_prefix(&word).unwrap_or(&word[..1]);
                i += n.len();
                toks.push(ETok::Num(
                    parse_i64(n).map_err(|_| format!("number '{n}' is too large"))?,
                ));
            } else if c == '"' || (c == '@' && chars.get(i + 1) == Some(&'"')) {
                // A quoted name: `"row i"` (generic form) or `@"row i"`.
                // Decoded as every MLIR string literal is (`mercury_ir`'s `unquote`: `\XX`
                // bytes, `\"`, `\\`, `\n`, `\t`; another escape is an error), so that a
                // name printed by `quote` reads back.
                let open = i + usize::from(c == '@');
                i = open + 1;
                loop {
                    match chars.get(i) {
                        None => return Err("unterminated quoted axis name".into()),
                        Some('"') => break,
                        Some('\\') => i += 2,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
                let literal: String = chars[open..i].iter().collect();
                let w = mercury_ir::syntax::parser::unquote(&literal)
                    .map_err(|(_, m)| format!("quoted axis name {literal}: {m}"))?;
                if w.is_empty() {
                    return Err("an axis name cannot be empty".into());
                }
                toks.push(ETok::Ident(w));
            } else if c.is_ascii_alphabetic() || c == '_' || c == '@' {
                let st = if c == '@' { i + 1 } else { i };
                i = st;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || "_.$-".contains(chars[i]))
                {
                    i += 1;
                }
                let w: String = chars[st..i].iter().collect();
                if w.is_empty() {
                    return Err("'@' must be followed by an axis name".into());
                }
                toks.push(if w == "mod" && c != '@' {
                    ETok::Mod
                } else {
                    ETok::Ident(w)
                });
            } else {
                toks.push(match c {
                    '+' => ETok::Plus,
                    '*' => ETok::Star,
                    '(' => ETok::LParen,
                    ')' => ETok::RParen,
                    _ => return Err(format!("unexpected '{c}' in index expression")),
                });
                i += 1;
            }
        }
        parse_etoks(&toks)
    }

    /// Parses a run of custom-syntax tokens (between commas of an index list).
    pub fn parse_tokens(run: &[Tok]) -> Result<IndexExpr, String> {
        let mut toks = Vec::new();
        flatten(run, &mut toks)?;
        parse_etoks(&toks)
    }
}

/// Whether `name` is an MLIR bare identifier (a letter or `_`, then letters, digits, `_`, `$`
/// or `.`), which symbols spell without quotes.
pub fn is_bare(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c))
        && name != "mod"
}

/// An axis as a symbol reference: `@i`, or `@"row i"` when the name is not a bare identifier.
pub fn axis_ref(name: &str) -> String {
    mercury_ir::attributes::symbol_name(name)
}

impl fmt::Display for IndexExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false, 0)
    }
}

fn flatten(run: &[Tok], out: &mut Vec<ETok>) -> Result<(), String> {
    for t in run {
        match &t.kind {
            TokKind::Symbol(p) if p.len() == 1 => out.push(ETok::Ident(p[0].clone())),
            TokKind::Number(n) => out.push(ETok::Num(parse_i64(n)?)),
            TokKind::Punct(p) if p == "+" => out.push(ETok::Plus),
            TokKind::Punct(p) if p == "*" => out.push(ETok::Star),
            TokKind::Keyword(k) if k == "mod" => out.push(ETok::Mod),
            TokKind::Group('(', inner) => {
                out.push(ETok::LParen);
                flatten(inner, out)?;
                out.push(ETok::RParen);
            }
            _ => return Err(format!("unexpected {} in index expression", t.describe())),
        }
    }
    Ok(())
}

fn parse_etoks(toks: &[ETok]) -> Result<IndexExpr, String> {
    if toks.is_empty() {
        return Err("empty index expression".into());
    }
    let mut pos = 0;
    let e = parse_mod(toks, &mut pos)?;
    if pos != toks.len() {
        return Err(format!("unexpected {:?} in index expression", toks[pos]));
    }
    Ok(e)
}

fn parse_mod(t: &[ETok], pos: &mut usize) -> Result<IndexExpr, String> {
    parse_sum(t, pos)
}

fn parse_sum(t: &[ETok], pos: &mut usize) -> Result<IndexExpr, String> {
    let mut e = parse_prod(t, pos)?;
    while t.get(*pos) == Some(&ETok::Plus) {
        *pos += 1;
        e = IndexExpr::Add(Box::new(e), Box::new(parse_prod(t, pos)?));
    }
    Ok(e)
}

fn parse_prod(t: &[ETok], pos: &mut usize) -> Result<IndexExpr, String> {
    let mut e = parse_atom(t, pos)?;
    loop {
        match t.get(*pos) {
            Some(ETok::Star) => {
                *pos += 1;
                e = IndexExpr::Mul(Box::new(e), Box::new(parse_atom(t, pos)?));
            }
            Some(ETok::Mod) => {
                *pos += 1;
                match t.get(*pos) {
                    Some(ETok::Num(m)) if *m > 0 => {
                        *pos += 1;
                        e = IndexExpr::Mod(Box::new(e), *m);
                    }
                    _ => return Err("'mod' must be followed by a positive integer".into()),
                }
            }
            _ => return Ok(e),
        }
    }
}

fn parse_atom(t: &[ETok], pos: &mut usize) -> Result<IndexExpr, String> {
    let tok = t.get(*pos).ok_or("incomplete index expression")?;
    *pos += 1;
    match tok {
        ETok::Ident(a) => Ok(IndexExpr::Axis(a.clone())),
        ETok::Num(n) => Ok(IndexExpr::Const(*n)),
        ETok::LParen => {
            let e = parse_mod(t, pos)?;
            if t.get(*pos) != Some(&ETok::RParen) {
                return Err("missing ')' in index expression".into());
            }
            *pos += 1;
            Ok(e)
        }
        other => Err(format!("unexpected {other:?} in index expression")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_roundtrip_and_eval() {
        for s in [
            "j",
            "(j + i) mod 8",
            "a * 4 + b",
            "(a + b) * 2",
            "((j + i) mod 4 + 1) mod 4",
        ] {
            let e = IndexExpr::parse_text(s).unwrap();
            assert_eq!(IndexExpr::parse_text(&e.to_string()).unwrap(), e, "{s}");
            assert_eq!(IndexExpr::parse_text(&e.to_custom()).unwrap(), e, "{s}");
        }
        let e = IndexExpr::parse_text("(j + i) mod 8").unwrap();
        let env: HashMap<String, i64> = [("j".to_string(), 5), ("i".to_string(), 6)].into();
        assert_eq!(e.eval(&env), Some(3));
        assert!(IndexExpr::parse_text("j +").is_err());
        assert!(IndexExpr::parse_text("j mod 0").is_err());
        assert!(IndexExpr::parse_text("(j").is_err());
    }

    /// Constants are integer literals as the IR's grammar reads them, hex included, in the
    /// string form as in the custom form; they print in decimal.
    #[test]
    fn hex_constants_read_and_print_decimal() {
        let e = IndexExpr::parse_text("(j + 0x10) mod 0xA").unwrap();
        assert_eq!(e, IndexExpr::parse_text("(j + 16) mod 10").unwrap());
        assert_eq!(e.to_string(), "(j + 16) mod 10");
        assert_eq!(
            IndexExpr::parse_text("0x1f*i").unwrap().to_string(),
            "31 * i"
        );
        assert_eq!(
            IndexExpr::parse_text("0x8000000000000000").unwrap_err(),
            "number '0x8000000000000000' is too large"
        );
        assert_eq!(
            IndexExpr::parse_text("99999999999999999999").unwrap_err(),
            "number '99999999999999999999' is too large"
        );
        // `0x` without a hex digit is `0` and a name, as MLIR lexes `0xi32`.
        assert!(IndexExpr::parse_text("0xg").is_err());
        assert_eq!(
            IndexExpr::parse_text("0 + xg").unwrap().to_string(),
            "0 + xg"
        );
    }
}
