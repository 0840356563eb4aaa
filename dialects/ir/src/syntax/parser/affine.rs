//! Affine maps and integer sets (`affine_map<(d0)[s0] -> (d0 + s0)>`,
//! `affine_set<(d0) : (d0 >= 0)>`), checked as upstream's `AffineParser.cpp` checks them:
//! declared identifiers, operands of binary ops, and the semi-affine rules (a product needs a
//! constant or symbolic side; `floordiv`, `ceildiv` and `mod` a constant or symbolic right
//! side). The IR keeps their text.

use super::Parser;
use crate::diag::Diagnostic;
use crate::syntax::lexer::TokenKind as K;

/// What an affine expression is, for the semi-affine rules: whether it uses a dimension.
#[derive(Debug, Clone, Copy)]
struct Expr {
    has_dim: bool,
}

impl Parser<'_> {
    /// The part of `affine_map<...>` inside the brackets.
    pub(crate) fn affine_map_body(&mut self) -> Result<(), Diagnostic> {
        let ids = self.affine_dims_and_symbols()?;
        if !self.eat(K::Arrow) {
            return Err(self.err("expected '->' or ':'"));
        }
        if !self.is(K::LParen) {
            return Err(self.err("expected '(' in affine map range"));
        }
        self.bump();
        if self.eat(K::RParen) {
            return Ok(());
        }
        loop {
            self.affine_expr(&ids)?;
            if self.eat(K::Comma) {
                continue;
            }
            if self.eat(K::RParen) {
                return Ok(());
            }
            return Err(self.err("expected ')' in affine map range"));
        }
    }

    /// The part of `affine_set<...>` inside the brackets.
    pub(crate) fn affine_set_body(&mut self) -> Result<(), Diagnostic> {
        let ids = self.affine_dims_and_symbols()?;
        if !self.eat(K::Colon) {
            return Err(self.err("expected '->' or ':'"));
        }
        self.expect(K::LParen, "'(' at start of integer set constraint list")?;
        if self.eat(K::RParen) {
            return Ok(());
        }
        loop {
            self.affine_expr(&ids)?;
            let cmp = match self.tok.kind {
                K::Greater | K::Less | K::Equal => {
                    let t = self.bump();
                    if self.is(K::Equal) && self.tok.start == t.end {
                        self.bump();
                        true
                    } else {
                        false
                    }
                }
                _ => false,
            };
            if !cmp {
                return Err(self.err(
                    "expected '== affine-expr' or '>= affine-expr' at end of affine constraint",
                ));
            }
            self.affine_expr(&ids)?;
            if self.eat(K::Comma) {
                continue;
            }
            self.expect(K::RParen, "')' at end of integer set constraint list")?;
            return Ok(());
        }
    }

    /// `(d0, d1)[s0]`: the identifiers, each with whether it is a dimension.
    fn affine_dims_and_symbols(&mut self) -> Result<Vec<(String, bool)>, Diagnostic> {
        let mut ids: Vec<(String, bool)> = Vec::new();
        self.expect(K::LParen, "'(' at start of dimensional identifiers list")?;
        let ident = |p: &mut Self, dim: bool, ids: &mut Vec<(String, bool)>| {
            if !p.is(K::BareIdent) {
                return Err(p.err("expected bare identifier"));
            }
            let name = p.tok_text().to_string();
            if ids.iter().any(|(n, _)| *n == name) {
                return Err(p.err(format!("redefinition of identifier '{name}'")));
            }
            p.bump();
            ids.push((name, dim));
            Ok(())
        };
        self.comma_list(K::RParen, ")", |p| ident(p, true, &mut ids))?;
        if self.eat(K::LSquare) {
            self.comma_list(K::RSquare, "]", |p| ident(p, false, &mut ids))?;
        }
        Ok(ids)
    }

    fn affine_expr(&mut self, ids: &[(String, bool)]) -> Result<Expr, Diagnostic> {
        self.descend()?;
        let r = self.affine_sum(ids);
        self.ascend();
        r
    }

    fn affine_sum(&mut self, ids: &[(String, bool)]) -> Result<Expr, Diagnostic> {
        let mut lhs = self.affine_term(ids)?;
        while self.is(K::Plus) || self.is(K::Minus) {
            self.bump();
            if self.at_expr_end() {
                return Err(self.err("missing right operand of binary op"));
            }
            let rhs = self.affine_term(ids)?;
            lhs = Expr {
                has_dim: lhs.has_dim || rhs.has_dim,
            };
        }
        Ok(lhs)
    }

    fn at_expr_end(&self) -> bool {
        matches!(
            self.tok.kind,
            K::RParen | K::Comma | K::Greater | K::Equal | K::Less | K::RSquare | K::Eof
        )
    }

    fn affine_term(&mut self, ids: &[(String, bool)]) -> Result<Expr, Diagnostic> {
        let mut lhs = self.affine_unary(ids)?;
        loop {
            let op = if self.is(K::Star) {
                "*"
            } else if self.is_word("floordiv") || self.is_word("ceildiv") || self.is_word("mod") {
                self.tok_text()
            } else {
                return Ok(lhs);
            };
            let at = self.tok.start;
            self.bump();
            if self.at_expr_end() || self.is(K::Plus) || self.is(K::Star) {
                return Err(self.err("missing right operand of binary op"));
            }
            let rhs = self.affine_unary(ids)?;
            if op == "*" {
                if lhs.has_dim && rhs.has_dim {
                    return Err(self.err_at(at, "non-affine expression: at least one of the multiply operands has to be either a constant or symbolic"));
                }
            } else if rhs.has_dim {
                return Err(self.err_at(
                    at,
                    format!("non-affine expression: right operand of {op} has to be either a constant or symbolic"),
                ));
            }
            lhs = Expr {
                has_dim: lhs.has_dim || rhs.has_dim,
            };
        }
    }

    fn affine_unary(&mut self, ids: &[(String, bool)]) -> Result<Expr, Diagnostic> {
        match self.tok.kind {
            K::Minus => {
                self.bump();
                if self.at_expr_end() {
                    return Err(self.err("missing operand of negation"));
                }
                self.affine_unary(ids)
            }
            K::LParen => {
                self.bump();
                if self.is(K::RParen) {
                    return Err(self.err("no expression inside parentheses"));
                }
                let e = self.affine_expr(ids)?;
                self.expect(K::RParen, "')'")?;
                Ok(e)
            }
            K::Integer => {
                self.bump();
                Ok(Expr { has_dim: false })
            }
            K::BareIdent => {
                let name = self.tok_text();
                match ids.iter().find(|(n, _)| n == name) {
                    Some((_, dim)) => {
                        let has_dim = *dim;
                        self.bump();
                        Ok(Expr { has_dim })
                    }
                    None => Err(self.err("use of undeclared identifier")),
                }
            }
            K::Plus | K::Star => Err(self.err("missing left operand of binary op")),
            _ => Err(self.err("expected affine expression")),
        }
    }
}
