//! Attributes, as upstream's `AttributeParser.cpp` reads them: the builtin ones (integers,
//! floats, strings, arrays, dictionaries, symbol references, types, `dense` / `sparse` /
//! `dense_resource` elements, `array<...>`, `affine_map` / `affine_set`, `strided`,
//! `distinct`, locations), aliases (`#name`) and dialect attributes (kept as text).

use super::{AliasValue, Parser};
use crate::attributes::Attribute;
use crate::diag::Diagnostic;
use crate::syntax::int_literal::{float_from_hex, nonfinite_from_hex};
use crate::syntax::lexer::TokenKind as K;
use crate::types::{Signedness, Type};
use indexmap::IndexMap;

/// A scalar of an elements literal: its kind and where it starts.
#[derive(Debug, Clone)]
enum Scalar {
    /// An integer literal: negative, its magnitude (`None` past 128 bits), hex.
    Int(bool, Option<u128>, bool),
    Float,
    Bool,
    Str,
    /// `(re, im)`.
    Complex(Box<(Scalar, usize)>, Box<(Scalar, usize)>),
}

/// A nested elements literal: a list or a scalar, with its offset.
#[derive(Debug, Clone)]
enum Lit {
    List(Vec<Lit>, usize),
    Scalar(Scalar, usize),
}

/// The magnitude of an integer literal (decimal or `0x` hex); `None` past 128 bits.
pub(crate) fn int_magnitude(text: &str) -> Option<u128> {
    match text.strip_prefix("0x") {
        Some(h) => u128::from_str_radix(h, 16).ok(),
        None => text.parse::<u128>().ok(),
    }
}

/// The value of an integer literal of type `ty`, in the range the type takes (signless:
/// `[-2^(N-1), 2^N)`, read as two's complement; signed; unsigned), or upstream's error.
pub(crate) fn int_in_type(neg: bool, mag: Option<u128>, ty: &Type) -> Result<i128, &'static str> {
    let (width, sign) = match ty {
        Type::Integer { width, signedness } => (*width, *signedness),
        Type::Index => (64, Signedness::Signless),
        _ => return Err("integer literal not valid for specified type"),
    };
    if neg && sign == Signedness::Unsigned {
        return Err("negative integer literal not valid for unsigned integer type");
    }
    let mag = mag.ok_or("integer constant out of range for attribute")?;
    let w = width.min(128);
    let out_of_range = Err("integer constant out of range for attribute");
    if neg {
        // At most 2^(N-1) for signless and signed (`-1 : i1` is fine).
        let limit: u128 = if w >= 128 {
            1u128 << 127
        } else {
            1u128 << (w.max(1) - 1)
        };
        if width == 0 || mag > limit {
            return out_of_range;
        }
        if mag == 1u128 << 127 {
            return Ok(i128::MIN);
        }
        return Ok(-(mag as i128));
    }
    let max = match sign {
        Signedness::Signed if w < 128 => (1u128 << (w.max(1) - 1)) - 1,
        _ if w < 128 => (1u128 << w) - 1,
        _ => u128::MAX,
    };
    if width == 0 && mag != 0 || mag > max {
        return out_of_range;
    }
    // Signless values past the signed range are their two's complement (`255 : i8` is -1).
    if sign == Signedness::Signless && w < 128 && w > 0 && mag >= 1u128 << (w - 1) {
        return Ok(mag as i128 - (1i128 << w));
    }
    if sign == Signedness::Signless && w == 128 && mag > i128::MAX as u128 {
        return Ok(mag as i128);
    }
    i128::try_from(mag).map_err(|_| "integer constant out of range for attribute")
}

/// The attribute of an integer value of type `ty`.
pub(crate) fn int_attr(value: i128, ty: Type) -> Attribute {
    match i64::try_from(value) {
        Ok(v) => Attribute::Integer { value: v, ty },
        Err(_) => Attribute::IntegerWide { value, ty },
    }
}

impl Parser<'_> {
    /// Any attribute.
    pub(crate) fn attribute(&mut self) -> Result<Attribute, Diagnostic> {
        self.descend()?;
        let r = self.attribute_inner();
        self.ascend();
        r
    }

    fn attribute_inner(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        match self.tok.kind {
            K::HashIdent => self.hash_attribute(),
            K::LSquare => {
                self.bump();
                let mut items = Vec::new();
                self.comma_list(K::RSquare, "]", |p| {
                    items.push(p.attribute()?);
                    Ok(())
                })?;
                Ok(Attribute::Array(items))
            }
            K::LBrace => Ok(Attribute::Dict(self.attr_dict()?)),
            K::AtIdent => Ok(Attribute::SymbolRef(self.symbol_ref()?)),
            K::String => {
                let s = self.string_value()?;
                if self.eat(K::Colon) {
                    let ty = self.type_()?;
                    return Ok(Attribute::Builtin(format!(
                        "{} : {ty}",
                        crate::attributes::quote(&s)
                    )));
                }
                Ok(Attribute::String(s))
            }
            K::Minus | K::Integer | K::Float => self.number_attribute(),
            K::BareIdent => {
                let w = self.tok_text();
                match w {
                    "true" | "false" => {
                        self.bump();
                        Ok(Attribute::Bool(w == "true"))
                    }
                    "unit" => {
                        self.bump();
                        Ok(Attribute::Unit)
                    }
                    "dense" => self.dense_attribute(),
                    "sparse" => self.sparse_attribute(),
                    "dense_resource" => {
                        self.bump();
                        self.expect(K::Less, "'<' after 'dense_resource'")?;
                        if !self.is(K::BareIdent) && !self.is(K::String) {
                            return Err(self.err("expected identifier key for 'resource' entry"));
                        }
                        self.bump();
                        self.expect(K::Greater, "'>'")?;
                        let text = self.text[start..self.prev_end()].to_string();
                        self.expect(K::Colon, "':'")?;
                        let at = self.tok.start;
                        let ty = self.type_()?;
                        if !ty.is_shaped() {
                            return Err(self.err_at(
                                at,
                                "dense resource elements attribute must be a shaped type",
                            ));
                        }
                        Ok(Attribute::Elements { text, ty })
                    }
                    "array" => self.dense_array_attribute(),
                    "affine_map" | "affine_set" => {
                        self.bump();
                        self.expect(K::Less, "'<'")?;
                        if w == "affine_map" {
                            self.affine_map_body()?;
                        } else {
                            self.affine_set_body()?;
                        }
                        self.expect(K::Greater, "'>'")?;
                        Ok(Attribute::Builtin(
                            self.text[start..self.prev_end()].to_string(),
                        ))
                    }
                    "strided" => self.strided_attribute(),
                    "distinct" => self.distinct_attribute(),
                    "loc" => {
                        let loc = self.location()?;
                        Ok(Attribute::Builtin(format!("loc({})", loc.mlir())))
                    }
                    _ => Ok(Attribute::Type(self.type_()?)),
                }
            }
            K::ExclaimIdent | K::LParen => Ok(Attribute::Type(self.type_()?)),
            _ => Err(self.err("expected attribute value")),
        }
    }

    /// Where the token before the current one ended.
    pub(crate) fn prev_end(&self) -> usize {
        let b = self.text.as_bytes();
        let mut e = self.tok.start;
        // Step back over whitespace and comments between the previous token and this one.
        loop {
            while e > 0 && matches!(b[e - 1], b' ' | b'\t' | b'\n' | b'\r') {
                e -= 1;
            }
            // A comment ends at a newline: find a `//` on this line before e.
            let line_start = self.text[..e].rfind('\n').map_or(0, |i| i + 1);
            match comment_start(&self.text[line_start..e]) {
                Some(c) => e = line_start + c,
                None => return e,
            }
        }
    }

    /// `{key = value, flag}`.
    pub(crate) fn attr_dict(&mut self) -> Result<IndexMap<String, Attribute>, Diagnostic> {
        self.expect(K::LBrace, "'{'")?;
        let mut out = IndexMap::new();
        self.comma_list(K::RBrace, "}", |p| {
            let at = p.tok.start;
            let key = match p.tok.kind {
                K::String => {
                    let s = p.string_value()?;
                    if s.is_empty() {
                        return Err(p.err_at(at, "expected valid attribute name"));
                    }
                    s
                }
                K::BareIdent => p.bump().text(p.text).to_string(),
                _ => return Err(p.err("expected attribute name")),
            };
            let value = if p.eat(K::Equal) {
                p.attribute()?
            } else {
                Attribute::Unit
            };
            if out.insert(key.clone(), value).is_some() {
                return Err(p.err_at(at, format!("duplicate key '{key}' in dictionary attribute")));
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// `@a::@b`.
    pub(crate) fn symbol_ref(&mut self) -> Result<Vec<String>, Diagnostic> {
        let mut path = vec![self.symbol_name()?];
        // `::` is two colons.
        while self.is(K::Colon) && self.text[self.tok.end..].starts_with(':') {
            let colon = self.tok.end;
            self.reset_to(colon + 1);
            if !self.is(K::AtIdent) {
                return Err(self.err("expected nested symbol reference identifier"));
            }
            path.push(self.symbol_name()?);
        }
        Ok(path)
    }

    /// The name of the current `@name` token.
    pub(crate) fn symbol_name(&mut self) -> Result<String, Diagnostic> {
        if !self.is(K::AtIdent) {
            return Err(self.err("expected symbol name"));
        }
        let t = self.tok;
        let text = &t.text(self.text)[1..];
        if text.starts_with('"') {
            let s = super::unquote(text).map_err(|(at, m)| self.err_at(t.start + 1 + at, m))?;
            self.bump();
            return Ok(s);
        }
        self.bump();
        Ok(text.to_string())
    }

    /// `#alias`, `#dialect.name<...>`, `#dialect<...>`.
    fn hash_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let t = self.bump();
        let full = &t.text(self.text)[1..];
        let has_body = self.is_adjacent_less(t.end);
        if !full.contains('.') && !has_body {
            return match self.alias(full) {
                Some(AliasValue::Attr(a)) => Ok(a),
                Some(AliasValue::Loc(l)) => Ok(Attribute::Builtin(format!("loc({})", l.mlir()))),
                None => Err(self.err_at(t.start, format!("undefined symbol alias id '{full}'"))),
            };
        }
        let (dialect, name) = full.split_once('.').unwrap_or((full, ""));
        self.check_dialect(dialect, t.start, "attribute")?;
        let body = if has_body {
            Some(self.pretty_body()?)
        } else {
            None
        };
        let attr = Attribute::Dialect {
            dialect: dialect.to_string(),
            name: name.to_string(),
            body,
        };
        // A dialect attribute may carry a type: `#foo<"x"> : i32`.
        Ok(attr)
    }

    /// An integer or float literal, with an optional `: type`.
    fn number_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        let neg = self.eat(K::Minus);
        let t = self.tok;
        if !matches!(t.kind, K::Integer | K::Float) {
            return Err(self.err("expected integer or floating point literal"));
        }
        self.bump();
        let text = t.text(self.text);
        let ty = if self.eat(K::Colon) {
            Some(self.type_()?)
        } else {
            None
        };
        if t.kind == K::Float {
            let ty = ty.unwrap_or(Type::F64);
            if !ty.is_builtin_float() {
                return Err(self.err_at(start, "floating point value not valid for specified type"));
            }
            let v: f64 = text
                .parse()
                .map_err(|_| self.err_at(t.start, "invalid floating point literal"))?;
            return Ok(Attribute::Float {
                value: if neg { -v } else { v },
                ty,
            });
        }
        let ty = ty.unwrap_or(Type::i(64));
        if ty.is_builtin_float() {
            if !text.starts_with("0x") {
                return Err(self.err_at(
                    start,
                    "unexpected decimal integer literal for a floating point value",
                ));
            }
            if neg {
                return Err(self.err_at(
                    start,
                    "hexadecimal float literal should not have a leading minus",
                ));
            }
            let value = float_from_hex(text, &ty).or_else(|m| {
                nonfinite_from_hex(text, &ty)
                    .filter(|_| m.contains("infinity or a NaN"))
                    .ok_or(m)
            });
            let value = value.map_err(|m| self.err_at(start, m))?;
            return Ok(Attribute::Float { value, ty });
        }
        let v = int_in_type(neg, int_magnitude(text), &ty).map_err(|m| self.err_at(start, m))?;
        if matches!(
            ty,
            Type::Integer {
                width: 1,
                signedness: Signedness::Signless
            }
        ) {
            return Ok(Attribute::Integer {
                value: v as i64,
                ty,
            });
        }
        Ok(int_attr(v, ty))
    }

    // ---- elements ------------------------------------------------------------------------

    fn dense_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        self.bump();
        self.expect(K::Less, "'<' after 'dense'")?;
        let lit = if self.is(K::Greater) {
            None
        } else if self.is(K::String) && self.tok_text().starts_with("\"0x") {
            let t = self.tok;
            let s = self.string_value()?;
            Some(Err((s, t.start)))
        } else {
            Some(Ok(self.elements_literal()?))
        };
        self.expect(K::Greater, "'>'")?;
        let text = self.text[start..self.prev_end()].to_string();
        if !self.is(K::Colon) {
            return Err(self.err("expected ':'"));
        }
        self.bump();
        let ty_at = self.tok.start;
        let ty = self.type_()?;
        let _ = ty_at;
        if !matches!(ty, Type::Tensor { .. } | Type::Vector { .. }) {
            return Err(self.err_at(start, "elements literal must be a shaped type"));
        }
        let Some(shape) = ty.static_shape() else {
            return Err(self.err_at(start, "elements literal type must have static shape"));
        };
        let elem = ty.element_type().cloned().unwrap_or(Type::None);
        match lit {
            None => {
                let n: u64 = shape.iter().product();
                if n != 0 {
                    return Err(self.err_at(
                        start,
                        format!("parsed zero elements, but type ('{ty}') expected at least 1"),
                    ));
                }
            }
            Some(Err((hex, at))) => {
                let bytes = (hex.len() - 2) / 2;
                let n: u64 = shape.iter().product();
                let w = elem_bits(&elem).unwrap_or(8);
                let each = u64::from(w).div_ceil(8) as usize;
                let ok = hex.len() % 2 == 0
                    && hex[2..].chars().all(|c| c.is_ascii_hexdigit())
                    && (bytes == each
                        || bytes as u64 == each as u64 * n
                        || (w == 1 && bytes as u64 == n.div_ceil(8)));
                if !ok {
                    return Err(self.err_at(
                        at,
                        format!("elements hex data size is invalid for provided type: {ty}"),
                    ));
                }
            }
            Some(Ok(lit)) => self.check_elements(&lit, &shape, &elem)?,
        }
        Ok(Attribute::Elements { text, ty })
    }

    /// `[...]` nested lists or a scalar.
    fn elements_literal(&mut self) -> Result<Lit, Diagnostic> {
        self.descend()?;
        let r = self.elements_literal_inner();
        self.ascend();
        r
    }

    fn elements_literal_inner(&mut self) -> Result<Lit, Diagnostic> {
        let at = self.tok.start;
        if self.eat(K::LSquare) {
            let mut items = Vec::new();
            self.comma_list(K::RSquare, "]", |p| {
                items.push(p.elements_literal()?);
                Ok(())
            })?;
            return Ok(Lit::List(items, at));
        }
        Ok(Lit::Scalar(self.scalar()?, at))
    }

    fn scalar(&mut self) -> Result<Scalar, Diagnostic> {
        let neg = self.eat(K::Minus);
        let t = self.tok;
        match t.kind {
            K::Integer => {
                self.bump();
                let text = t.text(self.text);
                Ok(Scalar::Int(
                    neg,
                    int_magnitude(text),
                    text.starts_with("0x"),
                ))
            }
            K::Float => {
                self.bump();
                Ok(Scalar::Float)
            }
            K::BareIdent if !neg && matches!(t.text(self.text), "true" | "false") => {
                self.bump();
                Ok(Scalar::Bool)
            }
            K::String if !neg => {
                self.string_value()?;
                Ok(Scalar::Str)
            }
            K::LParen if !neg => {
                self.bump();
                let a = self.tok.start;
                let re = self.scalar()?;
                if !self.eat(K::Comma) {
                    return Err(self.err("expected ',' between complex elements"));
                }
                let b = self.tok.start;
                let im = self.scalar()?;
                if !self.eat(K::RParen) {
                    return Err(self.err("expected ')' after complex elements"));
                }
                Ok(Scalar::Complex(Box::new((re, a)), Box::new((im, b))))
            }
            _ => Err(self.err("expected element literal of primitive type")),
        }
    }

    /// Checks a literal's shape and scalars against its type.
    fn check_elements(&self, lit: &Lit, shape: &[u64], elem: &Type) -> Result<(), Diagnostic> {
        match lit {
            // A splat.
            Lit::Scalar(s, at) => self.check_scalar(s, *at, elem),
            Lit::List(..) => {
                let mut inferred = Vec::new();
                infer_shape(lit, 0, &mut inferred).map_err(|at| {
                    self.err_at(
                        at,
                        "tensor literal is invalid; ranks are not consistent between elements",
                    )
                })?;
                if inferred.as_slice() != shape {
                    let show =
                        |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
                    return Err(self.err_at(
                        lit_at(lit),
                        format!(
                            "inferred shape of elements literal ([{}]) does not match type ([{}])",
                            show(&inferred),
                            show(shape)
                        ),
                    ));
                }
                let mut scalars = Vec::new();
                flatten(lit, &mut scalars);
                for (s, at) in scalars {
                    self.check_scalar(s, at, elem)?;
                }
                Ok(())
            }
        }
    }

    fn check_scalar(&self, s: &Scalar, at: usize, elem: &Type) -> Result<(), Diagnostic> {
        let err = |m: &str| self.err_at(at, m.to_string());
        match (s, elem) {
            (Scalar::Complex(re, im), Type::Complex(inner)) => {
                self.check_scalar(&re.0, re.1, inner)?;
                self.check_scalar(&im.0, im.1, inner)
            }
            (Scalar::Complex(..), _) => Err(err("expected element literal of primitive type")),
            (_, Type::Complex(_)) => Err(self.err_at(
                at,
                format!("parsed 1 elements, but type ('{elem}') expected 2 elements"),
            )),
            (Scalar::Str, _) => {
                if matches!(elem, Type::Integer { .. } | Type::Index) || elem.is_builtin_float() {
                    Err(err("expected element literal of primitive type"))
                } else {
                    Ok(())
                }
            }
            (Scalar::Bool, Type::Integer { width: 1, .. }) => Ok(()),
            (Scalar::Bool, _) => Err(err("expected i1 type for 'true' or 'false' values")),
            (Scalar::Float, Type::Integer { .. } | Type::Index) => {
                Err(err("expected integer elements, but parsed floating-point"))
            }
            (Scalar::Float, t) if t.is_builtin_float() => Ok(()),
            (Scalar::Int(neg, mag, hex), t) if t.is_builtin_float() => {
                if !hex {
                    return Err(err(
                        "unexpected decimal integer literal for a floating point value",
                    ));
                }
                if *neg {
                    return Err(err(
                        "hexadecimal float literal should not have a leading minus",
                    ));
                }
                let w = elem_bits(t).unwrap_or(64);
                match mag {
                    Some(m) if w >= 128 || m >> w == 0 => Ok(()),
                    _ => Err(err("hexadecimal float constant out of range for type")),
                }
            }
            (Scalar::Int(neg, mag, _), Type::Integer { signedness, .. }) => {
                if *neg && *signedness == Signedness::Unsigned {
                    return Err(err(
                        "expected unsigned integer elements, but parsed negative value",
                    ));
                }
                int_in_type(*neg, *mag, elem)
                    .map(|_| ())
                    .map_err(|_| err("integer constant out of range for type"))
            }
            (Scalar::Int(neg, mag, _), Type::Index) => int_in_type(*neg, *mag, elem)
                .map(|_| ())
                .map_err(|_| err("integer constant out of range for type")),
            _ => Err(err("expected element literal of primitive type")),
        }
    }

    fn sparse_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        self.bump();
        self.expect(K::Less, "'<' after 'sparse'")?;
        let mut parts = None;
        if !self.is(K::Greater) {
            let indices = self.elements_literal()?;
            self.expect(K::Comma, "','")?;
            let values_at = self.tok.start;
            let values = if self.is(K::String) && self.tok_text().starts_with("\"0x") {
                self.string_value()?;
                None
            } else {
                Some(self.elements_literal()?)
            };
            parts = Some((indices, values, values_at));
        }
        self.expect(K::Greater, "'>'")?;
        let text = self.text[start..self.prev_end()].to_string();
        self.expect(K::Colon, "':'")?;
        let ty_at = self.tok.start;
        let ty = self.type_()?;
        if !matches!(ty, Type::Tensor { .. } | Type::Vector { .. }) {
            return Err(self.err_at(start, "elements literal must be a shaped type"));
        }
        let Some(shape) = ty.static_shape() else {
            return Err(self.err_at(start, "elements literal type must have static shape"));
        };
        let elem = ty.element_type().cloned().unwrap_or(Type::None);
        if let Some((indices, values, values_at)) = parts {
            // Indices: integers, one row of `rank` per value.
            let mut idx = Vec::new();
            flatten(&indices, &mut idx);
            let mut rows: Vec<Vec<u128>> = Vec::new();
            match &indices {
                Lit::List(items, _) if items.iter().all(|i| matches!(i, Lit::List(..))) => {
                    for it in items {
                        let mut s = Vec::new();
                        flatten(it, &mut s);
                        rows.push(s.iter().map(|(x, _)| scalar_u128(x)).collect());
                    }
                }
                _ => rows = idx.iter().map(|(x, _)| vec![scalar_u128(x)]).collect(),
            }
            for (s, at) in &idx {
                if !matches!(s, Scalar::Int(false, Some(_), _)) {
                    return Err(
                        self.err_at(*at, "expected integer elements, but parsed floating-point")
                    );
                }
            }
            if let Some(values) = values {
                if let Lit::List(items, _) = &values {
                    if items.iter().any(|i| matches!(i, Lit::List(..))) {
                        return Err(
                            self.err_at(values_at, "expected 1-d tensor for sparse element values")
                        );
                    }
                }
                let mut vals = Vec::new();
                flatten(&values, &mut vals);
                for (s, at) in vals {
                    self.check_scalar(s, at, &elem)?;
                }
            }
            for (n, row) in rows.iter().enumerate() {
                let inside = row.len() == shape.len()
                    && row.iter().zip(&shape).all(|(i, d)| *i < u128::from(*d));
                if !inside && !shape.is_empty() {
                    let show: Vec<String> = row.iter().map(u128::to_string).collect();
                    return Err(self.err_at(
                        ty_at,
                        format!(
                            "sparse index #{n} is not contained within the value shape, with index=[{}], and type='{ty}'",
                            show.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(Attribute::Elements { text, ty })
    }

    /// `array<i32: 1, 2>`, `array<f32>`.
    fn dense_array_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        self.bump();
        self.expect(K::Less, "'<' after 'array'")?;
        let ty_at = self.tok.start;
        let ty = self.type_()?;
        let ok = matches!(
            ty,
            Type::Integer {
                width: 1 | 8 | 16 | 32 | 64,
                signedness: Signedness::Signless
            }
        ) || matches!(ty, Type::F32 | Type::F64);
        if !ok {
            return Err(self.err_at(
                ty_at,
                "expected integer or float type, got: ".to_string() + &ty.to_string(),
            ));
        }
        if self.eat(K::Colon) {
            loop {
                let at = self.tok.start;
                let s = self.scalar()?;
                match (&s, &ty) {
                    (Scalar::Bool, Type::Integer { width: 1, .. }) => {}
                    (_, Type::Integer { width: 1, .. }) => {
                        return Err(
                            self.err_at(at, "expected 'true' or 'false' values for i1 type")
                        );
                    }
                    (Scalar::Int(neg, mag, _), Type::Integer { .. }) => {
                        int_in_type(*neg, *mag, &ty).map_err(|m| self.err_at(at, m))?;
                    }
                    (Scalar::Int(_, _, false), _) => {
                        return Err(self.err_at(at, "expected floating point literal"));
                    }
                    (Scalar::Int(..) | Scalar::Float, Type::F32 | Type::F64) => {}
                    (Scalar::Float, _) => {
                        return Err(self.err_at(at, "expected integer literal"));
                    }
                    _ => return Err(self.err_at(at, "expected integer or floating point literal")),
                }
                if !self.eat(K::Comma) {
                    break;
                }
            }
        }
        self.expect(K::Greater, "'>' to close an array attribute")?;
        Ok(Attribute::Builtin(
            self.text[start..self.prev_end()].to_string(),
        ))
    }

    /// `strided<[1, ?], offset: 0>`.
    fn strided_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        let start = self.tok.start;
        self.bump();
        self.expect(K::Less, "'<' after 'strided'")?;
        self.expect(K::LSquare, "'['")?;
        let int_or_q = |p: &mut Self| -> Result<(), Diagnostic> {
            if p.eat(K::Question) {
                return Ok(());
            }
            let neg = p.eat(K::Minus);
            if !p.is(K::Integer) {
                return Err(p.err("expected a 64-bit signed integer or '?'"));
            }
            let t = p.bump();
            int_in_type(
                neg,
                int_magnitude(t.text(p.text)),
                &Type::Integer {
                    width: 64,
                    signedness: Signedness::Signed,
                },
            )
            .map_err(|_| p.err_at(t.start, "expected a 64-bit signed integer or '?'"))?;
            Ok(())
        };
        self.comma_list(K::RSquare, "]", |p| int_or_q(p))?;
        if self.eat(K::Comma) {
            if !self.eat_word("offset") {
                return Err(self.err("expected 'offset' after comma"));
            }
            if !self.eat(K::Colon) {
                return Err(self.err("expected ':' after 'offset'"));
            }
            int_or_q(self)?;
        }
        self.expect(K::Greater, "'>'")?;
        Ok(Attribute::Builtin(
            self.text[start..self.prev_end()].to_string(),
        ))
    }

    /// `distinct[N]<attr>`.
    fn distinct_attribute(&mut self) -> Result<Attribute, Diagnostic> {
        self.bump();
        self.expect(K::LSquare, "'[' after 'distinct'")?;
        if !self.is(K::Integer) {
            return Err(self.err("expected distinct ID"));
        }
        let t = self.bump();
        let id = int_magnitude(t.text(self.text))
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.err_at(t.start, "expected an unsigned 64-bit integer"))?;
        self.expect(K::RSquare, "']' to close distinct ID")?;
        self.expect(K::Less, "'<' after distinct ID")?;
        let attr = self.attribute()?;
        self.expect(K::Greater, "'>' to close distinct attribute")?;
        if let Some(prev) = self.distinct.get(&id) {
            if *prev != attr {
                return Err(self.err_at(
                    t.start,
                    format!("referenced attribute does not match previous definition: {prev}"),
                ));
            }
        }
        self.distinct.insert(id, attr.clone());
        Ok(Attribute::Distinct {
            id,
            attr: Box::new(attr),
        })
    }
}

/// Where a `//` comment starts in one line's text (outside strings), if it has one.
fn comment_start(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn lit_at(l: &Lit) -> usize {
    match l {
        Lit::List(_, at) | Lit::Scalar(_, at) => *at,
    }
}

fn infer_shape(l: &Lit, depth: usize, shape: &mut Vec<u64>) -> Result<(), usize> {
    match l {
        Lit::Scalar(_, at) => {
            if depth != shape.len() {
                return Err(*at);
            }
            Ok(())
        }
        Lit::List(items, at) => {
            if depth == shape.len() {
                if depth > 0 && shape.len() > depth {
                    return Err(*at);
                }
                shape.push(items.len() as u64);
            } else if depth > shape.len() || shape[depth] != items.len() as u64 {
                return Err(*at);
            }
            for it in items {
                infer_shape(it, depth + 1, shape)?;
            }
            // Every leaf must sit at the full depth.
            if items.is_empty() {
                return Ok(());
            }
            Ok(())
        }
    }
}

fn flatten<'l>(l: &'l Lit, out: &mut Vec<(&'l Scalar, usize)>) {
    match l {
        Lit::Scalar(s, at) => out.push((s, *at)),
        Lit::List(items, _) => items.iter().for_each(|i| flatten(i, out)),
    }
}

fn scalar_u128(s: &Scalar) -> u128 {
    match s {
        Scalar::Int(false, Some(m), _) => *m,
        _ => u128::MAX,
    }
}

/// Bits of one element of an integer or float type.
fn elem_bits(t: &Type) -> Option<u32> {
    match t {
        Type::Index => Some(64),
        Type::Complex(inner) => elem_bits(inner).map(|b| 2 * b),
        _ => t.int_or_float_width(),
    }
}
