//! Builtin attributes and opaque dialect attributes.

use crate::types::Type;
use indexmap::IndexMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// `42 : i64`; an integer without a type is `i64`.
    Integer {
        value: i64,
        ty: Type,
    },
    /// `1.5 : f32`; a float without a type is `f64`.
    Float {
        value: f64,
        ty: Type,
    },
    String(String),
    Bool(bool),
    Unit,
    Array(Vec<Attribute>),
    Dict(IndexMap<String, Attribute>),
    /// `@a` or `@a::@b`.
    SymbolRef(Vec<String>),
    Type(Type),
    /// `#dialect.name<body>`, body verbatim; an opaque attribute `#dialect<"...">` has an
    /// empty name.
    Dialect {
        dialect: String,
        name: String,
        body: Option<String>,
    },
    /// An integer too wide for [`Attribute::Integer`]'s i64 (`2^70 : i128`).
    IntegerWide {
        value: i128,
        ty: Type,
    },
    /// An elements attribute: `dense<...>`, `sparse<...>` or `dense_resource<...>` (`text`,
    /// validated against the type when parsed) of a shaped type.
    Elements {
        text: String,
        ty: Type,
    },
    /// A builtin attribute the parser validates but the IR does not take apart, kept as its
    /// text: `affine_map<...>`, `affine_set<...>`, `strided<...>`, `array<i32: ...>`.
    Builtin(String),
    /// `distinct[N]<attr>`: an attribute made unique by an id.
    Distinct {
        id: u64,
        attr: Box<Attribute>,
    },
}

impl Attribute {
    pub fn int(v: i64) -> Attribute {
        Attribute::Integer {
            value: v,
            ty: Type::i(64),
        }
    }
    pub fn str(s: impl Into<String>) -> Attribute {
        Attribute::String(s.into())
    }
    pub fn sym(s: impl Into<String>) -> Attribute {
        Attribute::SymbolRef(vec![s.into()])
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attribute::Integer { value, .. } => Some(*value),
            _ => None,
        }
    }
    /// The type of a typed attribute (integer, float, elements), if it has one.
    pub fn typed(&self) -> Option<&Type> {
        match self {
            Attribute::Integer { ty, .. }
            | Attribute::IntegerWide { ty, .. }
            | Attribute::Float { ty, .. }
            | Attribute::Elements { ty, .. } => Some(ty),
            Attribute::Bool(_) => Some(&Type::Integer {
                width: 1,
                signedness: crate::types::Signedness::Signless,
            }),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Attribute::Float { value, .. } => Some(*value),
            Attribute::Integer { value, .. } => Some(*value as f64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attribute::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Attribute::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Attribute]> {
        match self {
            Attribute::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The leaf name of a flat symbol reference.
    pub fn as_symbol(&self) -> Option<&str> {
        match self {
            Attribute::SymbolRef(p) if p.len() == 1 => Some(&p[0]),
            _ => None,
        }
    }
    pub fn as_type(&self) -> Option<&Type> {
        match self {
            Attribute::Type(t) => Some(t),
            _ => None,
        }
    }
    /// An array of integers.
    pub fn as_int_array(&self) -> Option<Vec<i64>> {
        self.as_array()?.iter().map(Attribute::as_int).collect()
    }
}

/// Characters `quote` writes as `\XX` escapes: control characters (C0, DEL, C1), whitespace
/// other than a space (U+2028, a no-break space...), and the invisible format characters that
/// can make text read other than it parses (zero-width characters, bidirectional overrides and
/// isolates, the byte-order mark).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}'
        )
}

/// Writes `s` as an MLIR string literal: `\"`, `\\`, `\n` and `\t` for those characters, what
/// is not printable (`needs_escape`) as its UTF-8 bytes in `\XX` escapes as upstream MLIR's
/// printer writes it, and other characters as they are.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes a symbol name, quoting it when it is not an MLIR bare identifier (a letter or `_`,
/// then letters, digits, `_`, `$` or `.`).
pub fn symbol_name(s: &str) -> String {
    let bare = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c));
    if bare {
        format!("@{s}")
    } else {
        format!("@{}", quote(s))
    }
}

fn is_bare_key(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c))
}

pub fn write_dict(f: &mut impl fmt::Write, d: &IndexMap<String, Attribute>) -> fmt::Result {
    write!(f, "{{")?;
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        if is_bare_key(k) {
            write!(f, "{k}")?;
        } else {
            write!(f, "{}", quote(k))?;
        }
        if !matches!(v, Attribute::Unit) {
            write!(f, " = {v}")?;
        }
    }
    write!(f, "}}")
}

/// The bit pattern of `v` in float type `ty` as a hex literal (`0x7FC00000` for an f32 NaN),
/// for values a decimal literal cannot spell (infinities, NaNs).
pub fn float_hex_bits(v: f64, ty: &Type) -> String {
    if let Some(bits) = crate::syntax::int_literal::nonfinite_bits(v, ty) {
        let digits = ty.int_or_float_width().unwrap_or(64) as usize / 4;
        return format!("0x{bits:0digits$X}");
    }
    match ty {
        Type::F32 => format!("0x{:08X}", (v as f32).to_bits()),
        Type::F16 => format!("0x{:04X}", f64_to_f16_bits(v)),
        Type::BF16 => format!("0x{:04X}", (v as f32).to_bits() >> 16),
        _ => format!("0x{:016X}", v.to_bits()),
    }
}

/// IEEE binary16 bits of a value representable as an f16 (and of infinities and NaN).
fn f64_to_f16_bits(v: f64) -> u16 {
    if v.is_nan() {
        return 0x7E00;
    }
    let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
    let a = v.abs();
    if a.is_infinite() || a >= 65520.0 {
        return sign | 0x7C00;
    }
    if a < 2f64.powi(-14) {
        return sign | (a / 2f64.powi(-24)).round() as u16;
    }
    let e = a.log2().floor() as i32;
    let m = ((a / 2f64.powi(e) - 1.0) * 1024.0).round() as u16;
    sign | ((((e + 15) as u16) << 10) + m)
}

/// Prints a float so that it parses back to the same value and always looks like a float.
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        return "0x7FF8000000000000".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "0x7FF0000000000000".into()
        } else {
            "0xFFF0000000000000".into()
        };
    }
    // MLIR's float literal needs a '.' before any exponent (`1.0e-05`, not `1e-5`, which
    // mlir-opt refuses: "expected '}' in attribute dictionary").
    let s = format!("{v:?}");
    match s.split_once('e') {
        _ if s.contains('.') => s,
        Some((mantissa, exp)) => format!("{mantissa}.0e{exp}"),
        None => format!("{s}.0"),
    }
}

impl fmt::Display for Attribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attribute::Integer { value, ty } => {
                if *ty == Type::i(64) {
                    write!(f, "{value}")
                } else {
                    write!(f, "{value} : {ty}")
                }
            }
            Attribute::Float { value, ty } => {
                // An infinity or a NaN prints as a hex bit pattern of its type, which without
                // its type would read back as an i64 integer.
                if !value.is_finite() {
                    write!(f, "{} : {ty}", float_hex_bits(*value, ty))
                } else if *ty == Type::F64 {
                    write!(f, "{}", format_float(*value))
                } else {
                    write!(f, "{} : {ty}", format_float(*value))
                }
            }
            Attribute::IntegerWide { value, ty } => write!(f, "{value} : {ty}"),
            Attribute::Elements { text, ty } => write!(f, "{text} : {ty}"),
            Attribute::Builtin(text) => write!(f, "{text}"),
            Attribute::Distinct { id, attr } => write!(f, "distinct[{id}]<{attr}>"),
            Attribute::String(s) => write!(f, "{}", quote(s)),
            Attribute::Bool(b) => write!(f, "{b}"),
            Attribute::Unit => write!(f, "unit"),
            Attribute::Array(items) => {
                write!(f, "[")?;
                for (i, a) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{a}")?;
                }
                write!(f, "]")
            }
            Attribute::Dict(d) => write_dict(f, d),
            Attribute::SymbolRef(path) => {
                for (i, p) in path.iter().enumerate() {
                    if i > 0 {
                        write!(f, "::")?;
                    }
                    write!(f, "{}", symbol_name(p))?;
                }
                Ok(())
            }
            Attribute::Type(t) => write!(f, "{t}"),
            Attribute::Dialect {
                dialect,
                name,
                body,
            } => {
                if name.is_empty() {
                    write!(f, "#{dialect}")?;
                } else {
                    write!(f, "#{dialect}.{name}")?;
                }
                if let Some(b) = body {
                    write!(f, "<{b}>")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{format_float, quote, symbol_name, Attribute, Type};

    /// Printable text is written as it is, with MLIR's short escapes for `"`, `\`, newline and
    /// tab; what is not printable as `\XX` bytes in upstream's spelling (upper-case hex).
    #[test]
    fn strings_print_as_mlir_literals() {
        for (s, want) in [
            ("plain é 日本", r#""plain é 日本""#),
            ("q\"b\\", r#""q\"b\\""#),
            ("a\nb\tc", r#""a\nb\tc""#),
            ("\0\u{1}\u{1f}\u{7f}", r#""\00\01\1F\7F""#),
            ("\r\u{b}\u{c}", r#""\0D\0B\0C""#),
            ("\u{85}\u{a0}", r#""\C2\85\C2\A0""#),
            (
                "\u{2028}\u{200b}\u{202e}\u{feff}",
                r#""\E2\80\A8\E2\80\8B\E2\80\AE\EF\BB\BF""#,
            ),
        ] {
            assert_eq!(quote(s), want, "{s:?}");
        }
        assert_eq!(symbol_name("a\tb"), r#"@"a\tb""#);
        assert_eq!(symbol_name("x\u{1}"), r#"@"x\01""#);
    }

    /// Every finite value prints as an MLIR float literal (a '.' before any exponent) and reads
    /// back as the same value.
    #[test]
    fn floats_print_as_mlir_literals() {
        for (v, want) in [
            (1e-5, "1.0e-5"),
            (1e20, "1.0e20"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (1.5e-7, "1.5e-7"),
        ] {
            assert_eq!(format_float(v), want);
        }
        for v in [1e-5, 1e20, 5e-324, 1e25, -3.25e-300, 0.1, f64::MAX] {
            let s = format_float(v);
            let (mantissa, _) = s.split_once('e').unwrap_or((&s, ""));
            assert!(mantissa.contains('.'), "{s}");
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{s}");
        }
        // An infinity or a NaN is a hex bit pattern, which is an integer literal: it keeps its
        // type even as an f64, so that it never reads back as an i64.
        let f64_inf = Attribute::Float {
            value: f64::INFINITY,
            ty: Type::F64,
        };
        assert_eq!(f64_inf.to_string(), "0x7FF0000000000000 : f64");
        let one = Attribute::Float {
            value: 1.0,
            ty: Type::F64,
        };
        assert_eq!(one.to_string(), "1.0");
    }
}
