//! Locations: `loc(...)` in all its forms (unknown, file:line:col and ranges, names, call
//! sites, fusions, aliases), as upstream's `LocationParser.cpp` reads them.

use super::{AliasValue, Parser};
use crate::diag::{Diagnostic, Location};
use crate::syntax::lexer::TokenKind as K;

impl Parser<'_> {
    /// `loc(...)`; the current token is `loc`.
    pub(crate) fn location(&mut self) -> Result<Location, Diagnostic> {
        self.bump();
        self.expect(K::LParen, "'(' in location")?;
        let loc = self.location_instance()?;
        self.expect(K::RParen, "')' in location")?;
        Ok(loc)
    }

    /// An optional `loc(...)` after an op, a block argument or a function argument.
    pub(crate) fn optional_trailing_location(&mut self) -> Result<Option<Location>, Diagnostic> {
        if self.is_word("loc") {
            return self.location().map(Some);
        }
        Ok(None)
    }

    fn location_instance(&mut self) -> Result<Location, Diagnostic> {
        self.descend()?;
        let r = self.location_instance_inner();
        self.ascend();
        r
    }

    fn location_instance_inner(&mut self) -> Result<Location, Diagnostic> {
        match self.tok.kind {
            K::HashIdent => {
                let t = self.bump();
                let name = &t.text(self.text)[1..];
                match self.alias(name) {
                    Some(AliasValue::Loc(l)) => Ok(l),
                    Some(AliasValue::Attr(a)) => {
                        Err(self.err_at(t.start, format!("expected location, but found '{a}'")))
                    }
                    None => Err(self.err_at(t.start, "operation location alias was never defined")),
                }
            }
            K::String => self.name_or_file_location(),
            K::BareIdent => match self.tok_text() {
                "unknown" => {
                    self.bump();
                    Ok(Location::Unknown)
                }
                "callsite" => {
                    self.bump();
                    self.expect(K::LParen, "'(' in callsite location")?;
                    let callee = self.location_instance()?;
                    if !self.eat_word("at") {
                        return Err(self.err("expected 'at' in callsite location"));
                    }
                    let caller = self.location_instance()?;
                    self.expect(K::RParen, "')' in callsite location")?;
                    Ok(Location::CallSite {
                        callee: Box::new(callee),
                        caller: Box::new(caller),
                    })
                }
                "fused" => {
                    self.bump();
                    let mut metadata = None;
                    if self.eat(K::Less) {
                        metadata = Some(self.attribute()?.to_string());
                        self.expect(K::Greater, "'>' after fused location metadata")?;
                    }
                    self.expect(K::LSquare, "'[' in fused location")?;
                    let mut locs = Vec::new();
                    loop {
                        locs.push(self.location_instance()?);
                        if !self.eat(K::Comma) {
                            break;
                        }
                    }
                    self.expect(K::RSquare, "']' in fused location")?;
                    Ok(Location::Fused { metadata, locs })
                }
                _ => Err(self.err("expected location instance")),
            },
            _ => Err(self.err("expected location instance")),
        }
    }

    fn name_or_file_location(&mut self) -> Result<Location, Diagnostic> {
        let name = self.string_value()?;
        if self.eat(K::Colon) {
            let line = self.u32_token("expected integer line number in FileLineColRange")?;
            if !self.eat(K::Colon) {
                return Ok(Location::FileLineCol {
                    filename: name,
                    line,
                    col: None,
                    end_line: None,
                    end_col: None,
                });
            }
            let col = self.u32_token("expected integer column number in FileLineColRange")?;
            if !self.is_word("to") {
                return Ok(Location::FileLineCol {
                    filename: name,
                    line,
                    col: Some(col),
                    end_line: None,
                    end_col: None,
                });
            }
            self.bump();
            let mut end_line = None;
            if self.is(K::Integer) {
                end_line =
                    Some(self.u32_token("expected integer line number in FileLineColRange")?);
            }
            if !self.eat(K::Colon) {
                return Err(
                    self.err("expected either integer or `:` post `to` in FileLineColRange")
                );
            }
            let end_col = self.u32_token("expected integer column number in FileLineColRange")?;
            return Ok(Location::FileLineCol {
                filename: name,
                line,
                col: Some(col),
                end_line,
                end_col: Some(end_col),
            });
        }
        let mut child = None;
        if self.eat(K::LParen) {
            child = Some(Box::new(self.location_instance()?));
            self.expect(K::RParen, "')' after child location of NameLoc")?;
        }
        Ok(Location::Name { name, child })
    }

    fn u32_token(&mut self, msg: &str) -> Result<u32, Diagnostic> {
        if !self.is(K::Integer) {
            return Err(self.err(msg));
        }
        let v = super::attrs::int_magnitude(self.tok_text())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.err(msg))?;
        self.bump();
        Ok(v)
    }
}
