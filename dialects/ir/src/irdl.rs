//! IRDL export: the text of an `irdl.dialect` that lets upstream MLIR (`mlir-opt
//! --irdl-file=...`) read a dialect's generic form, derived from its [`OpDef`]s.
//!
//! Each op lists its required attributes with their builtin base (optional ones are not
//! listed: IRDL has no optional attributes), its operands and results (all of the dialect's
//! value type, variadic where the definition is) and its regions. Keyword attributes become an
//! `irdl.any_of` of their keywords. What IRDL cannot say (value ranges, cross-op rules) stays
//! the op's Rust verifier's.

use crate::registry::{ArgDef, AttrKind, Dialect, OpDef};
use std::fmt::Write;

/// A dialect type, for the export: `!dialect.name<params...>` with unconstrained parameters.
#[derive(Debug, Clone, Copy)]
pub struct TypeDef {
    pub name: &'static str,
    /// One comment line above the definition.
    pub comment: &'static str,
    pub params: &'static [&'static str],
}

/// The constraint variable and its definition for an attribute kind (`None`: keywords).
fn base(kind: AttrKind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        AttrKind::SymbolName | AttrKind::String => ("str", "irdl.base \"#builtin.string\""),
        AttrKind::SymbolRef => ("sym", "irdl.base \"#builtin.symbol_ref\""),
        AttrKind::Int => ("int", "irdl.base \"#builtin.integer\""),
        AttrKind::Float => ("float", "irdl.base \"#builtin.float\""),
        AttrKind::Unit => ("unit", "irdl.base \"#builtin.unit\""),
        AttrKind::IntArray | AttrKind::SymbolArray => ("arr", "irdl.base \"#builtin.array\""),
        AttrKind::Custom(c) => (c.irdl_var, c.irdl_base),
        AttrKind::Type => ("type", "irdl.base \"#builtin.type\""),
        AttrKind::Bool | AttrKind::Any => ("any", "irdl.any"),
        AttrKind::Keyword(_) => return None,
    })
}

fn op_text(out: &mut String, dialect: &str, def: &OpDef, value_type: &str) {
    let short = def.name.strip_prefix(dialect).unwrap_or(def.name);
    let short = short.trim_start_matches('.');
    let _ = writeln!(out, "  irdl.operation @{short} {{");
    let mut vars: Vec<&str> = Vec::new();
    let mut attrs = Vec::new();
    for a in def.attrs.iter().filter(|a| !a.optional) {
        match (a.kind, base(a.kind)) {
            (AttrKind::Keyword(words), _) => {
                for w in words {
                    let _ = writeln!(out, "    %{w} = irdl.is \"{w}\"");
                }
                let list: Vec<String> = words.iter().map(|w| format!("%{w}")).collect();
                let _ = writeln!(out, "    %{} = irdl.any_of({})", a.name, list.join(", "));
                attrs.push(format!("\"{}\" = %{}", a.name, a.name));
            }
            (_, Some((var, text))) => {
                if !vars.contains(&var) {
                    vars.push(var);
                    let _ = writeln!(out, "    %{var} = {text}");
                }
                attrs.push(format!("\"{}\" = %{var}", a.name));
            }
            (_, None) => {}
        }
    }
    if !attrs.is_empty() {
        let _ = writeln!(out, "    irdl.attributes {{{}}}", attrs.join(", "));
    }
    let mut values = |what: &str, args: &[ArgDef]| {
        if args.is_empty() {
            return;
        }
        for a in args {
            let _ = writeln!(out, "    %{} = irdl.base {value_type}", a.name);
        }
        let list: Vec<String> = args
            .iter()
            .map(|a| {
                let v = if a.variadic { "variadic " } else { "" };
                format!("{}: {v}%{}", a.name, a.name)
            })
            .collect();
        let _ = writeln!(out, "    irdl.{what}({})", list.join(", "));
    };
    values("operands", def.operands);
    values("results", def.results);
    if !def.regions.is_empty() {
        for r in def.regions {
            let _ = writeln!(out, "    %{r} = irdl.region");
        }
        let list: Vec<String> = def.regions.iter().map(|r| format!("{r}: %{r}")).collect();
        let _ = writeln!(out, "    irdl.regions({})", list.join(", "));
    }
    let _ = writeln!(out, "  }}");
}

/// The IRDL text of `dialect`: `header` (comment lines, each without `// `), its types, then
/// its ops in definition order; every operand and result is constrained to `value_type` (an
/// IRDL symbol such as `@commir::@tile`).
pub fn export(dialect: &Dialect, header: &[&str], types: &[TypeDef], value_type: &str) -> String {
    let mut out = String::new();
    for line in header {
        let _ = writeln!(out, "// {line}");
    }
    let _ = writeln!(out, "irdl.dialect @{} {{", dialect.name);
    for t in types {
        let _ = writeln!(out, "  // {}", t.comment);
        let _ = writeln!(out, "  irdl.type @{} {{", t.name);
        for p in t.params {
            let _ = writeln!(out, "    %{p} = irdl.any");
        }
        let list: Vec<String> = t.params.iter().map(|p| format!("{p}: %{p}")).collect();
        let _ = writeln!(out, "    irdl.parameters({})", list.join(", "));
        let _ = writeln!(out, "  }}");
    }
    for def in dialect.ops {
        out.push('\n');
        op_text(&mut out, dialect.name, def, value_type);
    }
    out.push_str("}\n");
    out
}
