//! Declarative operation definitions and the dialect registry.
//!
//! An op is one `OpDef` value: its operands, results, attributes (with their syntax kind and
//! constraint), regions, traits, custom assembly format and extra verifier. Everything else
//! (custom parsing and printing, structural verification, IRDL export) is derived from it.

use crate::attributes::Attribute;
use crate::diag::Diagnostic;
use crate::ir::Operation;
use crate::syntax::format::{parse_format, FmtElem};
use crate::syntax::tokens::Tok;
use std::collections::HashMap;
use std::sync::Arc;

/// An operand or result slot.
#[derive(Debug, Clone, Copy)]
pub struct ArgDef {
    pub name: &'static str,
    /// Zero or more values.
    pub variadic: bool,
}

impl ArgDef {
    pub const fn one(name: &'static str) -> ArgDef {
        ArgDef {
            name,
            variadic: false,
        }
    }
    pub const fn many(name: &'static str) -> ArgDef {
        ArgDef {
            name,
            variadic: true,
        }
    }
}

/// Parse/print hooks for an attribute with a dialect-specific custom syntax. The custom form
/// is one token (usually a bracketed group); the generic form is a builtin attribute.
pub struct CustomAttrSyntax {
    pub name: &'static str,
    pub parse: fn(&Tok) -> Result<Attribute, String>,
    pub print: fn(&Attribute) -> String,
    /// Checks the generic (builtin) encoding.
    pub check: fn(&Attribute) -> Result<(), String>,
    /// The IRDL constraint on the generic encoding (e.g. `irdl.base "#builtin.array"`) and the
    /// name of its constraint variable, for the IRDL export (`irdl::export`).
    pub irdl_base: &'static str,
    pub irdl_var: &'static str,
}

impl std::fmt::Debug for CustomAttrSyntax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CustomAttrSyntax({})", self.name)
    }
}

/// What an attribute holds and how it is written in custom assembly.
#[derive(Debug, Clone, Copy)]
pub enum AttrKind {
    /// Defining symbol name: string attribute printed `@name`.
    SymbolName,
    /// Flat symbol reference `@name`.
    SymbolRef,
    Int,
    Float,
    String,
    Bool,
    /// Present or absent; printed as a keyword inside an optional group.
    Unit,
    /// A string from a fixed set, printed as a bare keyword.
    Keyword(&'static [&'static str]),
    IntArray,
    SymbolArray,
    Type,
    Any,
    Custom(&'static CustomAttrSyntax),
}

#[derive(Debug, Clone, Copy)]
pub struct AttrDef {
    pub name: &'static str,
    pub kind: AttrKind,
    pub optional: bool,
}

impl AttrDef {
    pub const fn req(name: &'static str, kind: AttrKind) -> AttrDef {
        AttrDef {
            name,
            kind,
            optional: false,
        }
    }
    pub const fn opt(name: &'static str, kind: AttrKind) -> AttrDef {
        AttrDef {
            name,
            kind,
            optional: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trait {
    /// Defines a symbol through `sym_name`.
    Symbol,
    /// Its region is a symbol table (symbol names unique inside).
    SymbolTable,
    /// Values from outside are not visible in its regions.
    IsolatedFromAbove,
    /// Must be the last op of its block.
    Terminator,
    /// No side effects, may be removed if unused.
    Pure,
    /// Every operand and result has the same type; a custom format that names no result
    /// types gives the results the first operand's type (MLIR's `SameOperandsAndResultType`).
    SameOperandsAndResultType,
    /// Each of its regions holds at most one block (MLIR's `SingleBlock`): an op whose
    /// semantics read one block refuses IR that would leave the others unread.
    SingleBlock,
    /// Its regions' blocks take no arguments (MLIR's `NoRegionArguments`).
    NoRegionArguments,
    /// Its regions' single blocks need no terminator (MLIR's `NoTerminator`: `builtin.module`).
    NoTerminator,
    /// Its single-block regions end in an implicit terminator that only the generic form
    /// spells out (as this upstream op, so that upstream MLIR accepts the region).
    ImplicitTerminator(&'static str),
    /// Custom-form ops in its regions written without a dialect prefix are of this dialect
    /// (MLIR's `OpAsmOpInterface::getDefaultDialect`: `builtin` for `builtin.module`).
    DefaultDialect(&'static str),
}

pub type VerifyFn = fn(&Operation, &VerifyContext) -> Result<(), Diagnostic>;

/// The declarative definition of one op.
#[derive(Debug, Clone, Copy)]
pub struct OpDef {
    pub name: &'static str,
    pub summary: &'static str,
    pub operands: &'static [ArgDef],
    pub results: &'static [ArgDef],
    pub attrs: &'static [AttrDef],
    pub regions: &'static [&'static str],
    pub traits: &'static [Trait],
    /// Custom assembly format (see `syntax::format`); `None` means generic form only.
    pub format: Option<&'static str>,
    pub verify: Option<VerifyFn>,
}

impl OpDef {
    pub fn has_trait(&self, t: Trait) -> bool {
        self.traits.contains(&t)
    }
    /// The implicit terminator's op name, if the op has one.
    pub fn implicit_terminator(&self) -> Option<&'static str> {
        self.traits.iter().find_map(|t| match t {
            Trait::ImplicitTerminator(n) => Some(*n),
            _ => None,
        })
    }
    /// The default dialect of its regions ([`Trait::DefaultDialect`]), if it sets one.
    pub fn default_dialect(&self) -> Option<&'static str> {
        self.traits.iter().find_map(|t| match t {
            Trait::DefaultDialect(d) => Some(*d),
            _ => None,
        })
    }
    pub fn attr(&self, name: &str) -> Option<&AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// What op verifiers can look up: the registry and the symbols visible from the op.
pub struct VerifyContext<'a> {
    pub registry: &'a Registry,
    /// Symbol name -> defining op, for every enclosing symbol table (innermost last); the
    /// innermost is where a flat reference (`@f`) resolves.
    pub symbols: Vec<HashMap<String, &'a Operation>>,
    /// Enclosing ops, outermost first.
    pub parents: Vec<&'a Operation>,
}

impl<'a> VerifyContext<'a> {
    /// Resolves a flat symbol reference `@name` in the nearest enclosing symbol table, as
    /// upstream's `SymbolTable::lookupNearestSymbolFrom` does: the symbols of an outer table
    /// are not visible from inside a nested one (`builtin.module @m { ... }`).
    pub fn lookup(&self, name: &str) -> Option<&'a Operation> {
        self.symbols.last().and_then(|t| t.get(name).copied())
    }
    pub fn parent(&self) -> Option<&'a Operation> {
        self.parents.last().copied()
    }
}

/// A dialect: a namespace and its ops.
pub struct Dialect {
    pub name: &'static str,
    pub summary: &'static str,
    pub ops: &'static [OpDef],
}

/// The hand-written custom assembly of an op whose syntax a declarative format does not say
/// (a function's signature, `arith.constant`'s typed value, enum keywords), as upstream's
/// C++ parsers and printers: `parse` reads what follows the op name into the op (operands,
/// attributes, regions, result types for `nresults` results), `print` writes it.
pub(crate) struct OpAsm {
    pub(crate) parse:
        fn(&mut crate::syntax::parser::Parser, &mut Operation, usize) -> Result<(), Diagnostic>,
    pub(crate) print: fn(&Operation, &mut crate::syntax::printer::Printer) -> String,
}

/// Registered dialects and ops, with compiled formats.
#[derive(Default, Clone)]
pub struct Registry {
    ops: HashMap<&'static str, Arc<RegisteredOp>>,
    asm: HashMap<&'static str, &'static OpAsm>,
    dialects: Vec<&'static str>,
    pub allow_unregistered: bool,
}

pub struct RegisteredOp {
    pub def: OpDef,
    pub format: Option<Vec<FmtElem>>,
}

impl Registry {
    pub fn new() -> Registry {
        let mut r = Registry::default();
        r.register(&crate::builtin::BUILTIN);
        r.register(&crate::builtin::FUNC);
        r.register(&crate::builtin::ARITH);
        for (name, asm) in crate::builtin::ASM {
            r.asm.insert(name, *asm);
        }
        r
    }
    /// The hand-written assembly of an op, if it has one.
    pub(crate) fn asm(&self, name: &str) -> Option<&'static OpAsm> {
        self.asm.get(name).copied()
    }
    /// Registers a dialect; panics on a malformed format string (a programming error in a
    /// dialect definition, caught by the dialect's own tests).
    pub fn register(&mut self, d: &'static Dialect) {
        self.dialects.push(d.name);
        for def in d.ops {
            let format = def.format.map(|f| {
                parse_format(f, def).unwrap_or_else(|e| panic!("bad format for {}: {e}", def.name))
            });
            self.ops
                .insert(def.name, Arc::new(RegisteredOp { def: *def, format }));
        }
    }
    pub fn lookup(&self, name: &str) -> Option<&Arc<RegisteredOp>> {
        self.ops.get(name)
    }
    pub fn dialect_registered(&self, name: &str) -> bool {
        self.dialects.contains(&name)
    }
    pub fn ops(&self) -> impl Iterator<Item = &OpDef> {
        self.ops.values().map(|r| &r.def)
    }
}
