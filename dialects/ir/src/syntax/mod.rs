//! Textual syntax: the pest grammar, the parser, the printer and assembly formats.

pub mod format;
pub mod format_parse;
pub mod int_literal;
pub mod lexer;
pub mod parser;
pub mod printer;
pub mod split;
pub mod tokens;
