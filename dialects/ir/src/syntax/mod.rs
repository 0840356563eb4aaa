//! Textual syntax: the pest grammar, the parser, the printer and assembly formats.

pub mod format;
pub mod int_literal;
pub mod parser;
pub mod printer;
pub mod split;
pub mod tokens;
