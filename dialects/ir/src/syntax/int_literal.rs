//! Integer literals, read as upstream MLIR's lexer reads them: decimal digits, or `0x` and
//! hexadecimal digits in either case (`0x10`, `0xff`; not `0X10`), after a `-` where the syntax
//! takes a sign (`-0x10`). `0x` without a hex digit after it is the integer `0` followed by a
//! word, as upstream lexes `0xi32`.
//!
//! The grammar's `uint_lit` and `int_lit` rules (grammar.pest) lex them wherever the textual IR
//! holds an integer: attributes (`{a = 0x10 : i64}`), custom-form tokens (`number`: integer
//! arrays, extents, commir dimensions and index expressions) and a result pack's count
//! (`%r:0x2`). [`parse_int_literal`] is the one conversion; each caller checks the range it needs
//! ([`parse_int_as`], [`parse_i64`]), so a literal past it is a located error, never a wrapped
//! value. Text outside the grammar (the string form of commir index expressions) finds its
//! literals with [`uint_literal_prefix`], which runs the same rule. Values print in decimal, as
//! upstream prints them.
//!
//! Dimensions of builtin shaped types are not integer literals: upstream reads
//! `tensor<0x10xf32>` as `0` by `10`, and so does the grammar's `dim` rule.

use crate::syntax::parser::{MlirGrammar, Rule};
use crate::types::Type;
use pest::Parser as _;

/// Why a text is not an integer of the range asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntLiteralError {
    /// Not an integer literal: a float (`1.5`), a word, `0x` without a digit, `0X10`.
    NotInteger,
    /// An integer literal above the range asked for.
    TooLarge,
    /// An integer literal below the range asked for.
    TooSmall,
}

/// The value of the integer literal `text` (the whole text: an optional `-`, then decimal
/// digits or `0x` and hex digits). A magnitude past `u64::MAX` is [`IntLiteralError::TooLarge`]
/// (or [`IntLiteralError::TooSmall`] after a `-`): no integer the IR holds is wider.
pub fn parse_int_literal(text: &str) -> Result<i128, IntLiteralError> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (radix, digits) = match unsigned.strip_prefix("0x") {
        Some(hex) => (16, hex),
        None => (10, unsigned),
    };
    // `from_str_radix` would also take a `+`: only digits are a literal.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(IntLiteralError::NotInteger);
    }
    match u64::from_str_radix(digits, radix) {
        Ok(m) if negative => Ok(-i128::from(m)),
        Ok(m) => Ok(i128::from(m)),
        Err(_) if negative => Err(IntLiteralError::TooSmall),
        Err(_) => Err(IntLiteralError::TooLarge),
    }
}

/// The integer literal `text` as a `T` (`i64`, `u64`, `usize`...): [`parse_int_literal`], then
/// [`IntLiteralError::TooLarge`] or [`IntLiteralError::TooSmall`] where `T` cannot hold it.
pub fn parse_int_as<T: TryFrom<i128>>(text: &str) -> Result<T, IntLiteralError> {
    let v = parse_int_literal(text)?;
    T::try_from(v).map_err(|_| {
        if v < 0 {
            IntLiteralError::TooSmall
        } else {
            IntLiteralError::TooLarge
        }
    })
}

/// Whether `text` is an integer literal (of any size): decimal or hex digits after an optional
/// `-`. A number token that is not one is a float.
pub fn is_int_literal(text: &str) -> bool {
    parse_int_literal(text) != Err(IntLiteralError::NotInteger)
}

/// Whether `text` is a hexadecimal integer literal (`0x10`, `-0x10`).
pub fn is_hex_literal(text: &str) -> bool {
    is_int_literal(text) && text.trim_start_matches('-').starts_with("0x")
}

/// The unsigned integer literal that starts `text`, as the grammar's `uint_lit` rule lexes it
/// (`0x1f` of `0x1f+i`, `0` of `0xg`), or `None` when `text` does not start with a digit.
pub fn uint_literal_prefix(text: &str) -> Option<&str> {
    let pairs = MlirGrammar::parse(Rule::uint_lit, text).ok()?;
    let end = pairs.last()?.as_span().end();
    Some(&text[..end])
}

/// Number `n` as a 64-bit integer, with the message a custom form reports. A whole number out of
/// range is too large (or too small), not "not an integer".
pub fn parse_i64(n: &str) -> Result<i64, String> {
    parse_int_as::<i64>(n).map_err(|e| match e {
        IntLiteralError::NotInteger => format!("'{n}' is not an integer"),
        IntLiteralError::TooSmall => format!(
            "'{n}' is too small for a 64-bit integer (at least {})",
            i64::MIN
        ),
        IntLiteralError::TooLarge => format!(
            "'{n}' is too large for a 64-bit integer (at most {})",
            i64::MAX
        ),
    })
}

/// A hexadecimal integer literal given a float type: the bit pattern of a value of that type,
/// as upstream reads `0x3F800000 : f32` (1.0). Upstream's errors for a leading `-` and for
/// bits past the type's width. An infinity or a NaN is refused here, as a decimal literal that
/// overflows is (`parser::finite_float`); a typed attribute reads one through
/// [`nonfinite_from_hex`], which keeps its exact bits for the printer.
pub fn float_from_hex(text: &str, ty: &Type) -> Result<f64, String> {
    if text.starts_with('-') {
        return Err("hexadecimal float literal should not have a leading minus".into());
    }
    let width = match ty {
        Type::F16 | Type::BF16 => 16,
        Type::F32 => 32,
        Type::F64 => 64,
        _ => return Err(format!("'{ty}' is not a float type")),
    };
    let bits = parse_int_as::<u64>(text)
        .ok()
        .filter(|b| width == 64 || b >> width == 0)
        .ok_or_else(|| format!("hexadecimal float constant out of range for type '{ty}'"))?;
    let value = match ty {
        Type::F16 => f16_to_f64(bits as u16),
        Type::BF16 => f64::from(f32::from_bits((bits as u32) << 16)),
        Type::F32 => f64::from(f32::from_bits(bits as u32)),
        _ => f64::from_bits(bits),
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!(
            "hexadecimal float constant '{text}' is an infinity or a NaN, which is not supported"
        ))
    }
}

/// `(width, mantissa bits)` of the float types whose hex literals are read as bit patterns:
/// f16, bf16, f32 and f64.
fn ieee_layout(ty: &Type) -> Option<(u32, u32)> {
    match ty {
        Type::F16 => Some((16, 10)),
        Type::BF16 => Some((16, 7)),
        Type::F32 => Some((32, 23)),
        Type::F64 => Some((64, 52)),
        _ => None,
    }
}

/// The value of a hex literal that [`float_from_hex`] refuses as an infinity or a NaN of `ty`
/// (f16, bf16, f32, f64), as an f64. A NaN keeps its sign and payload, carried exactly at the
/// top of the f64's mantissa by bit operations (a float conversion may quiet a signaling NaN),
/// so [`nonfinite_bits`] gives the literal's bits back, as upstream's APFloat keeps them
/// (`0x7FFFFFFF : f32` prints as written, not as the canonical `0x7FC00000`). `None` for a
/// literal that is not such a bit pattern of `ty`.
pub fn nonfinite_from_hex(text: &str, ty: &Type) -> Option<f64> {
    let (width, mant) = ieee_layout(ty)?;
    let bits = parse_int_as::<u64>(text).ok()?;
    if width < 64 && bits >> width != 0 {
        return None;
    }
    let exp_mask = (1u64 << (width - 1 - mant)) - 1;
    if (bits >> mant) & exp_mask != exp_mask {
        return None;
    }
    let sign = (bits >> (width - 1)) & 1;
    let payload = bits & ((1u64 << mant) - 1);
    Some(f64::from_bits(
        sign << 63 | 0x7ff << 52 | payload << (52 - mant),
    ))
}

/// The bit pattern in `ty` (f16, bf16, f32, f64) of an infinity or a NaN: the inverse of
/// [`nonfinite_from_hex`]. A NaN whose payload does not fit `ty`'s mantissa (one computed in
/// f64) becomes `ty`'s quiet NaN of the same sign. `None` for a finite value or another type.
pub fn nonfinite_bits(v: f64, ty: &Type) -> Option<u64> {
    let (width, mant) = ieee_layout(ty)?;
    if v.is_finite() {
        return None;
    }
    let b = v.to_bits();
    let sign = b >> 63;
    let mut payload = (b & ((1u64 << 52) - 1)) >> (52 - mant);
    if v.is_nan() && payload == 0 {
        payload = 1 << (mant - 1);
    }
    let exp_mask = (1u64 << (width - 1 - mant)) - 1;
    Some(sign << (width - 1) | exp_mask << mant | payload)
}

/// The value of IEEE binary16 bits (exact in an f64).
fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f64::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f64.powi(-24),
        0x1f if mantissa == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        e => sign * (1.0 + mantissa / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntLiteralError::{NotInteger, TooLarge, TooSmall};

    #[test]
    fn decimal_and_hex_literals_read_as_mlir_reads_them() {
        for (text, want) in [
            ("0", 0),
            ("42", 42),
            ("-7", -7),
            ("007", 7),
            ("0x10", 16),
            ("0xff", 255),
            ("0xFF", 255),
            ("0xAbC", 0xabc),
            ("-0x10", -16),
            ("0x0", 0),
            ("0x7FFFFFFFFFFFFFFF", i64::MAX as i128),
            ("-0x8000000000000000", i64::MIN as i128),
            ("0xFFFFFFFFFFFFFFFF", u64::MAX as i128),
            ("18446744073709551615", u64::MAX as i128),
            ("0x0000000000000000000000001", 1),
        ] {
            assert_eq!(parse_int_literal(text), Ok(want), "{text}");
            assert!(is_int_literal(text), "{text}");
        }
        for text in [
            "", "-", "0x", "-0x", "0X10", "0xg", "1.5", "1e5", "+1", "0x+1", "x10", "0x1.0", "--1",
            "0b1", "1_000", " 1",
        ] {
            assert_eq!(parse_int_literal(text), Err(NotInteger), "{text:?}");
            assert!(!is_int_literal(text), "{text:?}");
        }
    }

    #[test]
    fn literals_past_64_bits_are_errors_not_wrapped() {
        assert_eq!(parse_int_literal("0x10000000000000000"), Err(TooLarge));
        assert_eq!(parse_int_literal("18446744073709551616"), Err(TooLarge));
        assert_eq!(parse_int_literal("-0x10000000000000000"), Err(TooSmall));
        assert_eq!(
            parse_int_literal(&format!("0x{}", "f".repeat(40))),
            Err(TooLarge)
        );
        assert_eq!(parse_int_as::<i64>("0x7FFFFFFFFFFFFFFF"), Ok(i64::MAX));
        assert_eq!(parse_int_as::<i64>("0x8000000000000000"), Err(TooLarge));
        assert_eq!(parse_int_as::<i64>("-0x8000000000000000"), Ok(i64::MIN));
        assert_eq!(parse_int_as::<i64>("-0x8000000000000001"), Err(TooSmall));
        assert_eq!(parse_int_as::<u64>("0xFFFFFFFFFFFFFFFF"), Ok(u64::MAX));
        assert_eq!(parse_int_as::<u64>("-0x1"), Err(TooSmall));
        assert_eq!(parse_int_as::<u8>("0x100"), Err(TooLarge));
        assert_eq!(
            parse_i64("0x8000000000000000").unwrap_err(),
            "'0x8000000000000000' is too large for a 64-bit integer (at most 9223372036854775807)"
        );
        assert_eq!(
            parse_i64("-0x8000000000000001").unwrap_err(),
            "'-0x8000000000000001' is too small for a 64-bit integer (at least -9223372036854775808)"
        );
        assert_eq!(parse_i64("0x1.5").unwrap_err(), "'0x1.5' is not an integer");
        assert_eq!(parse_i64("-0x10"), Ok(-16));
    }

    #[test]
    fn the_grammar_rule_lexes_a_literal_prefix() {
        for (text, want) in [
            ("0x1f+i", Some("0x1f")),
            ("0x10", Some("0x10")),
            ("0xg", Some("0")),
            ("0xi32", Some("0")),
            ("0X10", Some("0")),
            ("12ab", Some("12")),
            ("0x1e5", Some("0x1e5")),
            ("x10", None),
            ("-1", None),
            ("", None),
        ] {
            assert_eq!(uint_literal_prefix(text), want, "{text:?}");
        }
        assert!(is_hex_literal("0x10") && is_hex_literal("-0x10"));
        assert!(!is_hex_literal("10") && !is_hex_literal("0x") && !is_hex_literal("1.5"));
    }

    #[test]
    fn hex_literals_of_float_types_are_bit_patterns() {
        for (text, ty, want) in [
            ("0x3F800000", Type::F32, 1.0),
            ("0x3DCCCCCD", Type::F32, f64::from(0.1f32)),
            ("0x3FF0000000000000", Type::F64, 1.0),
            ("0x10", Type::F64, f64::from_bits(16)),
            ("0x3C00", Type::F16, 1.0),
            ("0xC000", Type::F16, -2.0),
            ("0x0001", Type::F16, 2f64.powi(-24)),
            ("0x7BFF", Type::F16, 65504.0),
            ("0x3F80", Type::BF16, 1.0),
            ("0x1", Type::F32, f64::from(f32::from_bits(1))),
        ] {
            assert_eq!(
                float_from_hex(text, &ty).map(f64::to_bits),
                Ok(want.to_bits()),
                "{text} : {ty}"
            );
        }
        let neg_zero = float_from_hex("0x8000", &Type::F16).unwrap();
        assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
        for (text, ty, why) in [
            ("0x1FFFF", Type::F16, "out of range for type 'f16'"),
            ("0x100000000", Type::F32, "out of range for type 'f32'"),
            (
                "0x10000000000000000",
                Type::F64,
                "out of range for type 'f64'",
            ),
            ("-0x10", Type::F32, "leading minus"),
            ("0x7C00", Type::F16, "infinity or a NaN"),
            ("0x7FC00000", Type::F32, "infinity or a NaN"),
            ("0x7FF0000000000000", Type::F64, "infinity or a NaN"),
            ("0x7F80", Type::BF16, "infinity or a NaN"),
        ] {
            let e = float_from_hex(text, &ty).unwrap_err();
            assert!(e.contains(why), "{text} : {ty}: {e}");
        }
        // NaN payloads, signaling NaNs and infinities keep their bits.
        for (text, ty) in [
            ("0x7FFFFFFF", Type::F32),
            ("0x7F800001", Type::F32),
            ("0xFFC00000", Type::F32),
            ("0x7F800000", Type::F32),
            ("0xFF800000", Type::F32),
            ("0x7C01", Type::F16),
            ("0xFE00", Type::F16),
            ("0x7F81", Type::BF16),
            ("0x7FF0000000000001", Type::F64),
            ("0xFFF8000000000000", Type::F64),
        ] {
            let v = nonfinite_from_hex(text, &ty).expect(text);
            let bits = u64::from_str_radix(&text[2..], 16).unwrap();
            assert_eq!(nonfinite_bits(v, &ty), Some(bits), "{text} : {ty}");
        }
        assert_eq!(nonfinite_from_hex("0x3F800000", &Type::F32), None);
        assert_eq!(nonfinite_from_hex("0x17F800000", &Type::F32), None);
        // A NaN computed in f64 whose payload is below f32's mantissa: f32's quiet NaN.
        let low = f64::from_bits(0x7FF0_0000_0000_0001);
        assert_eq!(nonfinite_bits(low, &Type::F32), Some(0x7FC0_0000));
    }
}
