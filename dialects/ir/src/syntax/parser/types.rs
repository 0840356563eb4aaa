//! Types: the builtin ones, aliases (`!name`) and dialect types (`!dialect.name<...>`, kept as
//! text), as upstream's `TypeParser.cpp` reads them.

use super::Parser;
use crate::attributes::Attribute;
use crate::diag::Diagnostic;
use crate::syntax::lexer::TokenKind as K;
use crate::types::{Dim, FloatKind, Signedness, Type};

/// The widest integer type upstream allows.
pub const MAX_INT_WIDTH: u64 = (1 << 24) - 1;

impl Parser<'_> {
    /// Any type, a function type included.
    pub(crate) fn type_(&mut self) -> Result<Type, Diagnostic> {
        if self.is(K::LParen) {
            return self.function_type();
        }
        self.non_function_type()
    }

    /// `(inputs) -> results`.
    pub(crate) fn function_type(&mut self) -> Result<Type, Diagnostic> {
        self.descend()?;
        let r = self.function_type_inner();
        self.ascend();
        r
    }

    fn function_type_inner(&mut self) -> Result<Type, Diagnostic> {
        let inputs = self.type_list_parens()?;
        self.expect(K::Arrow, "'->' in function type")?;
        let results = self.function_result_types()?;
        Ok(Type::Function { inputs, results })
    }

    /// `(t, t)` (the `(` is the current token).
    pub(crate) fn type_list_parens(&mut self) -> Result<Vec<Type>, Diagnostic> {
        self.expect(K::LParen, "'('")?;
        let mut out = Vec::new();
        self.comma_list(K::RParen, ")", |p| {
            out.push(p.type_()?);
            Ok(())
        })?;
        Ok(out)
    }

    /// A function's results: `(t, t)` or one non-function type.
    pub(crate) fn function_result_types(&mut self) -> Result<Vec<Type>, Diagnostic> {
        if self.is(K::LParen) {
            return self.type_list_parens();
        }
        Ok(vec![self.non_function_type()?])
    }

    /// `t, t, ...` (at least one).
    pub(crate) fn type_list(&mut self) -> Result<Vec<Type>, Diagnostic> {
        let mut out = vec![self.type_()?];
        while self.eat(K::Comma) {
            out.push(self.type_()?);
        }
        Ok(out)
    }

    pub(crate) fn non_function_type(&mut self) -> Result<Type, Diagnostic> {
        self.descend()?;
        let r = self.non_function_type_inner();
        self.ascend();
        r
    }

    fn non_function_type_inner(&mut self) -> Result<Type, Diagnostic> {
        match self.tok.kind {
            K::ExclaimIdent => return self.dialect_type(),
            K::BareIdent => {}
            _ => return Err(self.err("expected non-function type")),
        }
        let word = self.tok_text();
        let simple = match word {
            "bf16" => Some(Type::BF16),
            "f16" => Some(Type::F16),
            "f32" => Some(Type::F32),
            "f64" => Some(Type::F64),
            "index" => Some(Type::Index),
            "none" => Some(Type::None),
            _ => FloatKind::ALL
                .iter()
                .find(|k| k.spelling() == word)
                .map(|k| Type::Float(*k)),
        };
        if let Some(t) = simple {
            self.bump();
            return Ok(t);
        }
        if let Some(t) = self.integer_type()? {
            return Ok(t);
        }
        match word {
            "tensor" => self.tensor_type(),
            "memref" => self.memref_type(),
            "vector" => self.vector_type(),
            "complex" => {
                self.bump();
                self.expect(K::Less, "'<' in complex type")?;
                let at = self.tok.start;
                let elem = self.type_()?;
                if !(elem.is_builtin_float() || matches!(elem, Type::Integer { .. })) {
                    return Err(self.err_at(at, "invalid element type for complex"));
                }
                self.expect(K::Greater, "'>' in complex type")?;
                Ok(Type::Complex(Box::new(elem)))
            }
            "tuple" => {
                self.bump();
                self.expect(K::Less, "'<' in tuple type")?;
                let mut items = Vec::new();
                if !self.eat(K::Greater) {
                    items = self.type_list()?;
                    self.expect(K::Greater, "'>' in tuple type")?;
                }
                Ok(Type::Tuple(items))
            }
            _ => Err(self.err("expected non-function type")),
        }
    }

    /// `iN`, `siN`, `uiN`, if the current word is one.
    fn integer_type(&mut self) -> Result<Option<Type>, Diagnostic> {
        let word = self.tok_text();
        let (sign, digits) = if let Some(d) = word.strip_prefix("si") {
            (Signedness::Signed, d)
        } else if let Some(d) = word.strip_prefix("ui") {
            (Signedness::Unsigned, d)
        } else if let Some(d) = word.strip_prefix('i') {
            (Signedness::Signless, d)
        } else {
            return Ok(None);
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Ok(None);
        }
        let width = digits.parse::<u64>().ok().filter(|w| *w <= MAX_INT_WIDTH);
        let Some(width) = width else {
            return Err(self.err("invalid integer width"));
        };
        self.bump();
        Ok(Some(Type::Integer {
            width: width as u32,
            signedness: sign,
        }))
    }

    /// `!alias`, `!dialect.name<body>` or `!dialect<body>`.
    fn dialect_type(&mut self) -> Result<Type, Diagnostic> {
        let t = self.bump();
        let full = &t.text(self.text)[1..];
        if !full.contains('.') && !self.is_adjacent_less(t.end) {
            return self.type_alias(full).ok_or_else(|| {
                self.err_at(t.start, format!("undefined symbol alias id '{full}'"))
            });
        }
        let (dialect, name) = full.split_once('.').unwrap_or((full, ""));
        self.check_dialect(dialect, t.start, "type")?;
        let body = if self.is_adjacent_less(t.end) {
            Some(self.pretty_body()?)
        } else {
            None
        };
        Ok(Type::Dialect {
            dialect: dialect.to_string(),
            name: name.to_string(),
            body,
        })
    }

    /// A dialect attribute or type of a dialect that is not registered is an error unless
    /// unregistered dialects are allowed.
    pub(crate) fn check_dialect(
        &self,
        dialect: &str,
        at: usize,
        what: &str,
    ) -> Result<(), Diagnostic> {
        if self.registry.allow_unregistered || self.registry.dialect_registered(dialect) {
            return Ok(());
        }
        Err(self.err_at(
            at,
            format!("#{dialect} {what} created with unregistered dialect. If this is intended, please call allowUnregisteredDialects() on the MLIRContext, or use -allow-unregistered-dialect with the MLIR opt tool used")
                .replacen(&format!("#{dialect} "), "", 1),
        ))
    }

    /// Whether a `<` follows right at `end` (a dialect symbol's body).
    pub(crate) fn is_adjacent_less(&self, end: usize) -> bool {
        self.is(K::Less) && self.tok.start == end
    }

    /// The body of a pretty dialect attribute or type, `<...>` with `<>`, `[]`, `()` and `{}`
    /// balanced and strings skipped, as upstream scans it; the current token is the `<`.
    /// Returns the text between the outer brackets.
    pub(crate) fn pretty_body(&mut self) -> Result<String, Diagnostic> {
        let start = self.tok.start;
        let b = self.text.as_bytes();
        let mut stack: Vec<u8> = Vec::new();
        let mut i = start;
        while i < b.len() {
            let c = b[i];
            match c {
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        if b[i] == b'\\' {
                            i += 1;
                        }
                        if i < b.len() && b[i] == b'\n' {
                            return Err(self.err_at(i, "expected '\"' in string literal"));
                        }
                        i += 1;
                    }
                    if i >= b.len() {
                        return Err(self.err_at(start, "expected '\"' in string literal"));
                    }
                }
                b'<' | b'[' | b'(' | b'{' => {
                    stack.push(c);
                    if stack.len() > super::MAX_NESTING.saturating_sub(self.depth) {
                        return Err(self.err_at(
                            i,
                            format!("nesting too deep: more than {} levels of operations, attributes and types", super::MAX_NESTING),
                        ));
                    }
                }
                b'-' if b.get(i + 1) == Some(&b'>') => i += 1,
                b'>' | b']' | b')' | b'}' => {
                    let want = match c {
                        b'>' => b'<',
                        b']' => b'[',
                        b')' => b'(',
                        _ => b'{',
                    };
                    if stack.pop() != Some(want) {
                        return Err(self.err_at(
                            i,
                            format!(
                                "unbalanced '{}' character in pretty dialect name",
                                c as char
                            ),
                        ));
                    }
                    if stack.is_empty() {
                        let body = self.text[start + 1..i].to_string();
                        self.reset_to(i + 1);
                        return Ok(body);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Err(self.err_at(start, "unbalanced '<' character in pretty dialect name"))
    }

    /// The dimension list of a shaped type: `4x?x` (each followed by `x`), as upstream lexes
    /// it (`4x8xf32` is the integer `4` then the word `x8xf32`). `allow_scalable` reads
    /// vector dimensions (`[4]`). Stops at the element type.
    fn dimension_list(&mut self, allow_scalable: bool) -> Result<Vec<(Dim, bool)>, Diagnostic> {
        let mut dims = Vec::new();
        loop {
            let scalable = allow_scalable && self.is(K::LSquare);
            if scalable {
                self.bump();
            }
            let dim = match self.tok.kind {
                K::Question if !allow_scalable => {
                    self.bump();
                    None
                }
                K::Integer => {
                    let t = self.tok;
                    let text = t.text(self.text);
                    if let Some(rest) = text.strip_prefix("0x") {
                        // `0x10`: the dimension 0, then `x10`.
                        let _ = rest;
                        self.reset_to(t.start + 1);
                        Some(0)
                    } else {
                        self.bump();
                        Some(
                            text.parse::<u64>()
                                .map_err(|_| self.err_at(t.start, "invalid dimension"))?,
                        )
                    }
                }
                _ if scalable => return Err(self.err("expected dimension size in vector type")),
                _ => return Ok(dims),
            };
            if scalable {
                self.expect(K::RSquare, "']'")?;
            }
            if dim.is_some_and(|d| d > i64::MAX as u64) {
                return Err(self.err("invalid dimension"));
            }
            dims.push((dim, scalable));
            self.eat_x_in_dimension_list()?;
        }
    }

    /// The `x` after a dimension: the start of the next word.
    fn eat_x_in_dimension_list(&mut self) -> Result<(), Diagnostic> {
        if self.is(K::BareIdent) && self.tok_text().starts_with('x') {
            let at = self.tok.start + 1;
            self.reset_to(at);
            return Ok(());
        }
        Err(self.err("expected 'x' in dimension list"))
    }

    fn tensor_type(&mut self) -> Result<Type, Diagnostic> {
        self.bump();
        self.expect(K::Less, "'<' in tensor type")?;
        let shape = if self.eat(K::Star) {
            self.eat_x_in_dimension_list()?;
            None
        } else {
            Some(
                self.dimension_list(false)?
                    .into_iter()
                    .map(|(d, _)| d)
                    .collect(),
            )
        };
        let at = self.tok.start;
        let elem = self.type_()?;
        if !is_valid_element(&elem) {
            return Err(self.err_at(at, "invalid tensor element type"));
        }
        let mut encoding = None;
        if self.eat(K::Comma) {
            if shape.is_none() {
                return Err(self.err("unranked tensor cannot have an encoding"));
            }
            encoding = Some(self.attribute()?.to_string());
        }
        self.expect(K::Greater, "'>' in tensor type")?;
        Ok(Type::Tensor {
            shape,
            elem: Box::new(elem),
            encoding,
        })
    }

    fn memref_type(&mut self) -> Result<Type, Diagnostic> {
        self.bump();
        self.expect(K::Less, "'<' in memref type")?;
        let shape: Option<Vec<Dim>> = if self.eat(K::Star) {
            self.eat_x_in_dimension_list()?;
            None
        } else {
            Some(
                self.dimension_list(false)?
                    .into_iter()
                    .map(|(d, _)| d)
                    .collect(),
            )
        };
        let at = self.tok.start;
        let elem = self.type_()?;
        if !is_valid_element(&elem) || matches!(elem, Type::Tensor { .. } | Type::Tuple(_)) {
            return Err(self.err_at(at, "invalid memref element type"));
        }
        let mut layout = None;
        let mut memory_space: Option<String> = None;
        while self.eat(K::Comma) {
            if self.is(K::Greater) {
                return Err(self.err("expected list element"));
            }
            let at = self.tok.start;
            let a = self.attribute()?;
            let is_layout = match &a {
                Attribute::Builtin(t) => t.starts_with("affine_map<") || t.starts_with("strided<"),
                _ => false,
            };
            if is_layout {
                if memory_space.is_some() {
                    return Err(self.err_at(at, "expected memory space to be last in memref type"));
                }
                if shape.is_none() {
                    return Err(self.err_at(at, "cannot have affine map for unranked memref type"));
                }
                if let Attribute::Builtin(t) = &a {
                    let rank = shape.as_ref().map_or(0, Vec::len);
                    if let Some(dims) = affine_map_dims(t) {
                        if dims != rank {
                            return Err(self.err_at(
                                at,
                                format!("memref layout mismatch between rank and affine map: {rank} != {dims}"),
                            ));
                        }
                    }
                    if let Some(n) = strided_count(t) {
                        if n != rank {
                            return Err(
                                self.err_at(at, "expected the number of strides to match the rank")
                            );
                        }
                    }
                }
                layout = Some(a.to_string());
            } else {
                if memory_space.is_some() {
                    return Err(self.err_at(at, "multiple memory spaces specified in memref type"));
                }
                let unknown_dialect = matches!(&a, Attribute::Dialect { dialect, .. } if !self.registry.dialect_registered(dialect));
                if unknown_dialect
                    || matches!(
                        a,
                        Attribute::Type(_) | Attribute::Float { .. } | Attribute::Unit
                    )
                {
                    return Err(self.err_at(at, "unsupported memory space Attribute"));
                }
                memory_space = Some(a.to_string());
            }
        }
        self.expect(K::Greater, "'>' in memref type")?;
        Ok(Type::MemRef {
            shape,
            elem: Box::new(elem),
            layout,
            memory_space,
        })
    }

    fn vector_type(&mut self) -> Result<Type, Diagnostic> {
        self.bump();
        self.expect(K::Less, "'<' in vector type")?;
        let at = self.tok.start;
        let dims = self.dimension_list(true)?;
        if dims.iter().any(|(d, _)| *d == Some(0)) {
            let sizes: Vec<String> = dims
                .iter()
                .map(|(d, _)| d.map_or("?".into(), |d| d.to_string()))
                .collect();
            return Err(self.err_at(
                at,
                format!(
                    "vector types must have positive constant sizes but got {}",
                    sizes.join(", ")
                ),
            ));
        }
        let elem_at = self.tok.start;
        let elem = self.type_()?;
        if !(matches!(elem, Type::Integer { .. } | Type::Index) || elem.is_builtin_float()) {
            return Err(self.err_at(
                elem_at,
                "failed to verify 'elementType': VectorElementTypeInterface instance",
            ));
        }
        self.expect(K::Greater, "'>' in vector type")?;
        Ok(Type::Vector {
            shape: dims.iter().map(|(d, _)| d.unwrap_or(0)).collect(),
            scalable: dims.iter().map(|(_, s)| *s).collect(),
            elem: Box::new(elem),
        })
    }
}

/// Element types a tensor or memref may hold: not a function, not `none`, not a tensor in
/// a tensor.
fn is_valid_element(t: &Type) -> bool {
    !matches!(t, Type::Function { .. } | Type::None | Type::Tensor { .. })
}

/// The number of dimensions of an `affine_map<(d0, d1)[s0] -> ...>` text.
fn affine_map_dims(text: &str) -> Option<usize> {
    let body = text.strip_prefix("affine_map<(")?;
    let inner = &body[..body.find(')')?];
    Some(if inner.trim().is_empty() {
        0
    } else {
        inner.split(',').count()
    })
}

/// The number of strides of a `strided<[...]>` text.
fn strided_count(text: &str) -> Option<usize> {
    let body = text.strip_prefix("strided<[")?;
    let inner = &body[..body.find(']')?];
    Some(if inner.trim().is_empty() {
        0
    } else {
        inner.split(',').count()
    })
}
