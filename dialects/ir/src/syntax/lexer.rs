//! The lexer of MLIR's textual syntax, as upstream's `mlir/lib/AsmParser/Lexer.cpp` splits
//! text: bare identifiers (keywords and builtin type names among them), `@`, `%`, `^`, `#` and
//! `!` identifiers, integer and float literals, string literals, punctuation, and the
//! `{-#` / `#-}` file-metadata brackets. It lexes on demand: the parser can move it back
//! (`reset`) to re-lex text in another way, as upstream does inside dimension lists
//! (`4x8xf32`) and pretty dialect attribute bodies.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Eof,
    /// A lexical error; the token's text is what could not be lexed.
    Error,
    /// `[a-zA-Z_][a-zA-Z0-9_$.]*`: keywords, builtin type names, op names.
    BareIdent,
    /// `@name` or `@"name"`.
    AtIdent,
    /// `%name`, `%0`.
    PercentIdent,
    /// `^bb0`.
    CaretIdent,
    /// `#name`, `#0`.
    HashIdent,
    /// `!name`.
    ExclaimIdent,
    Integer,
    Float,
    String,
    LParen,
    RParen,
    LSquare,
    RSquare,
    LBrace,
    RBrace,
    Less,
    Greater,
    Colon,
    Comma,
    Equal,
    Arrow,
    Plus,
    Minus,
    Star,
    Slash,
    Question,
    VerticalBar,
    Ellipsis,
    /// `{-#`
    FileMetadataBegin,
    /// `#-}`
    FileMetadataEnd,
}

/// One token: its kind and its byte range in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'a>(&self, buf: &'a str) -> &'a str {
        &buf[self.start..self.end]
    }
    pub fn is(&self, kind: TokenKind) -> bool {
        self.kind == kind
    }
}

/// An on-demand lexer over one buffer.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    buf: &'a str,
    pos: usize,
    /// Why the last `Error` token is one.
    pub error: &'static str,
    /// Where that error is (a bad escape inside a string: the backslash).
    pub error_at: usize,
}

fn is_suffix_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'$' | b'.' | b'_' | b'-')
}

impl<'a> Lexer<'a> {
    pub fn new(buf: &'a str) -> Lexer<'a> {
        Lexer {
            buf,
            pos: 0,
            error: "",
            error_at: 0,
        }
    }
    pub fn buffer(&self) -> &'a str {
        self.buf
    }
    /// Moves the lexer to byte `pos` (a position a token started or ended at).
    pub fn reset(&mut self, pos: usize) {
        self.pos = pos.min(self.buf.len());
    }
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn tok(&mut self, kind: TokenKind, start: usize) -> Token {
        Token {
            kind,
            start,
            end: self.pos,
        }
    }
    fn err(&mut self, start: usize, msg: &'static str) -> Token {
        self.error = msg;
        self.error_at = start;
        if self.pos == start {
            // Step over one character so that the parser never loops on the same spot.
            self.pos += self.buf[start..].chars().next().map_or(0, char::len_utf8);
        }
        self.tok(TokenKind::Error, start)
    }
    fn peek_byte(&self, off: usize) -> u8 {
        *self.buf.as_bytes().get(self.pos + off).unwrap_or(&0)
    }

    /// The next token.
    pub fn lex(&mut self) -> Token {
        let b = self.buf.as_bytes();
        loop {
            let start = self.pos;
            let Some(&c) = b.get(self.pos) else {
                return self.tok(TokenKind::Eof, start);
            };
            self.pos += 1;
            use TokenKind as K;
            return match c {
                b' ' | b'\t' | b'\n' | b'\r' | 0 => continue,
                b'/' if self.peek_byte(0) == b'/' => {
                    while self.pos < b.len() && b[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                    continue;
                }
                b'/' => self.tok(K::Slash, start),
                b':' => self.tok(K::Colon, start),
                b',' => self.tok(K::Comma, start),
                b'.' if self.peek_byte(0) == b'.' && self.peek_byte(1) == b'.' => {
                    self.pos += 2;
                    self.tok(K::Ellipsis, start)
                }
                b'.' => self.err(start, "expected three consecutive dots for an ellipsis"),
                b'(' => self.tok(K::LParen, start),
                b')' => self.tok(K::RParen, start),
                b'{' if self.peek_byte(0) == b'-' && self.peek_byte(1) == b'#' => {
                    self.pos += 2;
                    self.tok(K::FileMetadataBegin, start)
                }
                b'{' => self.tok(K::LBrace, start),
                b'}' => self.tok(K::RBrace, start),
                b'[' => self.tok(K::LSquare, start),
                b']' => self.tok(K::RSquare, start),
                b'<' => self.tok(K::Less, start),
                b'>' => self.tok(K::Greater, start),
                b'=' => self.tok(K::Equal, start),
                b'+' => self.tok(K::Plus, start),
                b'*' => self.tok(K::Star, start),
                b'-' if self.peek_byte(0) == b'>' => {
                    self.pos += 1;
                    self.tok(K::Arrow, start)
                }
                b'-' => self.tok(K::Minus, start),
                b'?' => self.tok(K::Question, start),
                b'|' => self.tok(K::VerticalBar, start),
                b'@' => self.at_ident(start),
                b'#' if self.peek_byte(0) == b'-' && self.peek_byte(1) == b'}' => {
                    self.pos += 2;
                    self.tok(K::FileMetadataEnd, start)
                }
                b'#' => self.prefixed(start, K::HashIdent),
                b'!' => self.prefixed(start, K::ExclaimIdent),
                b'^' => self.prefixed(start, K::CaretIdent),
                b'%' => self.prefixed(start, K::PercentIdent),
                b'"' => self.string(start),
                b'0'..=b'9' => self.number(start),
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    while self.pos < b.len()
                        && (b[self.pos].is_ascii_alphanumeric()
                            || matches!(b[self.pos], b'_' | b'$' | b'.'))
                    {
                        self.pos += 1;
                    }
                    self.tok(K::BareIdent, start)
                }
                _ => {
                    self.pos = start;
                    self.err(start, "unexpected character")
                }
            };
        }
    }

    fn at_ident(&mut self, start: usize) -> Token {
        let b = self.buf.as_bytes();
        if self.peek_byte(0) == b'"' {
            self.pos += 1;
            let s = self.string(self.pos - 1);
            if s.kind == TokenKind::Error {
                return s;
            }
            return self.tok(TokenKind::AtIdent, start);
        }
        let c = self.peek_byte(0);
        if !(c.is_ascii_alphabetic() || c == b'_') {
            return self.err(start, "@ identifier expected to start with letter or '_'");
        }
        while self.pos < b.len()
            && (b[self.pos].is_ascii_alphanumeric() || matches!(b[self.pos], b'_' | b'$' | b'.'))
        {
            self.pos += 1;
        }
        self.tok(TokenKind::AtIdent, start)
    }

    fn prefixed(&mut self, start: usize, kind: TokenKind) -> Token {
        let b = self.buf.as_bytes();
        let c = self.peek_byte(0);
        if c.is_ascii_digit() {
            while self.pos < b.len() && b[self.pos].is_ascii_digit() {
                self.pos += 1;
            }
        } else if c.is_ascii_alphabetic() || matches!(c, b'$' | b'.' | b'_' | b'-') {
            while self.pos < b.len() && is_suffix_char(b[self.pos]) {
                self.pos += 1;
            }
        } else {
            return self.err(
                start,
                match kind {
                    TokenKind::HashIdent => "invalid attribute name",
                    TokenKind::ExclaimIdent => "invalid type identifier",
                    TokenKind::CaretIdent => "invalid block name",
                    _ => "invalid SSA name",
                },
            );
        }
        self.tok(kind, start)
    }

    fn string(&mut self, start: usize) -> Token {
        let b = self.buf.as_bytes();
        loop {
            let Some(&c) = b.get(self.pos) else {
                return self.err_at(start, "expected '\"' in string literal");
            };
            self.pos += 1;
            match c {
                b'"' => return self.tok(TokenKind::String, start),
                b'\n' | 0x0b | 0x0c => {
                    self.pos -= 1;
                    return self.err_at(start, "expected '\"' in string literal");
                }
                b'\\' => {
                    let n = self.peek_byte(0);
                    if matches!(n, b'"' | b'\\' | b'n' | b't') {
                        self.pos += 1;
                    } else if n.is_ascii_hexdigit() && self.peek_byte(1).is_ascii_hexdigit() {
                        self.pos += 2;
                    } else {
                        self.pos -= 1;
                        let t = self.err_at(start, "unknown escape in string literal");
                        self.pos += 1;
                        return t;
                    }
                }
                _ => {}
            }
        }
    }

    /// An error token spanning from `start` to the current position.
    fn err_at(&mut self, start: usize, msg: &'static str) -> Token {
        self.error = msg;
        self.error_at = self.pos.min(self.buf.len());
        self.tok(TokenKind::Error, start)
    }

    fn number(&mut self, start: usize) -> Token {
        let b = self.buf.as_bytes();
        if b[start] == b'0' && self.peek_byte(0) == b'x' {
            if !self.peek_byte(1).is_ascii_hexdigit() {
                return self.tok(TokenKind::Integer, start);
            }
            self.pos += 2;
            while self.pos < b.len() && b[self.pos].is_ascii_hexdigit() {
                self.pos += 1;
            }
            return self.tok(TokenKind::Integer, start);
        }
        while self.pos < b.len() && b[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        if self.peek_byte(0) != b'.' {
            return self.tok(TokenKind::Integer, start);
        }
        self.pos += 1;
        while self.pos < b.len() && b[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        if matches!(self.peek_byte(0), b'e' | b'E') {
            let n = self.peek_byte(1);
            if n.is_ascii_digit()
                || (matches!(n, b'-' | b'+') && self.peek_byte(2).is_ascii_digit())
            {
                self.pos += 2;
                while self.pos < b.len() && b[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
            }
        }
        self.tok(TokenKind::Float, start)
    }
}

#[cfg(test)]
mod tests {
    use super::{Lexer, TokenKind as K};

    fn kinds(s: &str) -> Vec<(K, String)> {
        let mut l = Lexer::new(s);
        let mut out = vec![];
        loop {
            let t = l.lex();
            if t.kind == K::Eof {
                return out;
            }
            out.push((t.kind, t.text(s).to_string()));
        }
    }

    #[test]
    fn lexes_as_upstream() {
        let got = kinds("%x#1 = \"a.b\"() {-# #-} // c\n 0xi32 1.e5 4x8xf32 @\"q\" ^bb0 -> ...");
        let want = [
            (K::PercentIdent, "%x"),
            (K::HashIdent, "#1"),
            (K::Equal, "="),
            (K::String, "\"a.b\""),
            (K::LParen, "("),
            (K::RParen, ")"),
            (K::FileMetadataBegin, "{-#"),
            (K::FileMetadataEnd, "#-}"),
            (K::Integer, "0"),
            (K::BareIdent, "xi32"),
            (K::Float, "1.e5"),
            (K::Integer, "4"),
            (K::BareIdent, "x8xf32"),
            (K::AtIdent, "@\"q\""),
            (K::CaretIdent, "^bb0"),
            (K::Arrow, "->"),
            (K::Ellipsis, "..."),
        ];
        let got: Vec<(K, &str)> = got.iter().map(|(k, s)| (*k, s.as_str())).collect();
        assert_eq!(got, want);
        assert_eq!(kinds("\"ab")[0].0, K::Error);
        assert_eq!(kinds("\"a\\qb\"")[0].0, K::Error);
    }
}
