//! String literals, the nesting bound and float literal values: the pieces of the parser
//! that work on text rather than tokens.

use crate::diag::{Diagnostic, SourceFile};
use std::sync::Arc;

/// Brackets one level of nesting opens at most: an op in a region `({`, an attribute in an
/// array in a dictionary `{x = [`, a type `<(`.
pub(crate) const BRACKETS_PER_LEVEL: usize = 4;

/// The located "nesting too deep" error at byte `at`.
pub(crate) fn nesting_error(file: &Arc<SourceFile>, at: usize) -> Diagnostic {
    Diagnostic::error(
        file.location(at),
        format!(
            "nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"
        ),
    )
}

/// The offset where the brackets of `text[..end]` (`(`, `[`, `{`, `<`; strings, comments and
/// `->` skipped) first nest deeper than `limit`, if they do.
pub(crate) fn too_deep(text: &str, end: usize, limit: usize) -> Option<usize> {
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

/// How deeply operations, attributes, types and bracketed tokens may nest in the input. The
/// parser, verifier, printer and passes recurse over the IR; this bound keeps them well inside
/// an 8 MiB main-thread stack even in unoptimized builds.
pub const MAX_NESTING: usize = 128;

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

/// A float literal's value; one that overflows to infinity (`1e309`) is refused, since the
/// printer could only write it back as an f64 hex bit pattern, which an f32 (or narrower) does
/// not read back (found by mercury-fuzz; regression
/// tools/mercury-fuzz/corpus/parser/float-overflow.mlir). `int_literal::float_from_hex` refuses
/// an infinity or a NaN spelled in hex for the same reason.
pub fn finite_float(text: &str) -> Result<f64, &'static str> {
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
