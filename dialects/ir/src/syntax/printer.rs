//! Prints IR in custom form (where an op has a format) or generic form.

use crate::attributes::write_dict;
use crate::ir::{Block, Operation, Region, Value, ValueId};
use crate::registry::{Registry, Trait};
use crate::syntax::format::{print_custom, CustomPrinter};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, Default)]
pub struct PrintOptions {
    /// Print every op in the generic form (`--mlir-print-op-generic`).
    pub generic: bool,
    /// Name every value `%0`, `%1`, ... in the order it is printed, ignoring the names the
    /// source gave: two modules that differ only in their value names print the same (the
    /// schedule cache's key).
    pub numbered: bool,
}

/// Prints an op (usually a module) followed by a newline.
pub fn print_op(registry: &Registry, op: &Operation, opts: PrintOptions) -> String {
    let mut p = Printer {
        registry,
        opts,
        names: HashMap::new(),
        used: HashSet::new(),
        next: 0,
        indent: 0,
    };
    let mut out = p.op(op);
    out.push('\n');
    out
}

struct Printer<'r> {
    registry: &'r Registry,
    opts: PrintOptions,
    names: HashMap<ValueId, String>,
    used: HashSet<String>,
    next: usize,
    indent: usize,
}

fn sanitize(hint: &str) -> String {
    let s: String = hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_$.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "v".into()
    } else {
        s
    }
}

impl<'r> Printer<'r> {
    fn name_of(&mut self, v: &Value) -> String {
        if let Some(n) = self.names.get(&v.id) {
            return format!("%{n}");
        }
        let name = match &v.name {
            Some(h) if !self.opts.numbered && !h.chars().all(|c| c.is_ascii_digit()) => {
                let base = sanitize(h);
                let mut cand = base.clone();
                let mut k = 1;
                while self.used.contains(&cand) {
                    cand = format!("{base}_{k}");
                    k += 1;
                }
                cand
            }
            _ => loop {
                let cand = self.next.to_string();
                self.next += 1;
                if !self.used.contains(&cand) {
                    break cand;
                }
            },
        };
        self.used.insert(name.clone());
        self.names.insert(v.id, name.clone());
        format!("%{name}")
    }

    fn pad(&self) -> String {
        "  ".repeat(self.indent)
    }

    fn op(&mut self, op: &Operation) -> String {
        let mut out = String::new();
        if !op.results.is_empty() {
            let names: Vec<String> = op.results.iter().map(|r| self.name_of(r)).collect();
            out.push_str(&names.join(", "));
            out.push_str(" = ");
        }
        let custom = if self.opts.generic {
            None
        } else {
            self.registry
                .lookup(&op.name)
                .and_then(|r| r.format.as_ref().map(|f| (r.def, f.clone())))
        };
        match custom {
            Some((def, format)) => {
                out.push_str(if op.name == "builtin.module" {
                    "module"
                } else {
                    &op.name
                });
                let body = print_custom(op, &def, &format, self);
                if !body.is_empty() {
                    out.push(' ');
                    out.push_str(&body);
                }
            }
            None => out.push_str(&self.generic(op)),
        }
        out
    }

    fn generic(&mut self, op: &Operation) -> String {
        let mut out = crate::attributes::quote(&op.name);
        out.push('(');
        let operands: Vec<String> = op.operands.iter().map(|v| self.name_of(v)).collect();
        out.push_str(&operands.join(", "));
        out.push(')');
        if !op.successors.is_empty() {
            out.push_str(&format!("[{}]", op.successors.join(", ")));
        }
        if !op.regions.is_empty() {
            let def = self.registry.lookup(&op.name).map(|r| &r.def);
            let terminator = def.and_then(|d| d.implicit_terminator());
            let single_block = def.is_some_and(|d| d.has_trait(Trait::SingleBlock));
            out.push_str(" (");
            for (i, r) in op.regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let text = match terminator {
                    Some(t) => {
                        let mut with_term = r.clone();
                        with_term.entry_mut().ops.push(crate::ir::Operation::new(t));
                        self.region(&with_term)
                    }
                    // An empty body of a single-block op (`module {}`) is one empty block, which
                    // the generic form spells `^bb0:` as MLIR prints it: `({\n})` is a region
                    // of no block, which upstream refuses for `builtin.module` ("region with 1
                    // blocks").
                    None if single_block
                        && r.blocks.len() <= 1
                        && r.blocks
                            .iter()
                            .all(|b| b.ops.is_empty() && b.args.is_empty()) =>
                    {
                        format!("{{\n{}^bb0:\n{}}}", "  ".repeat(self.indent), self.pad())
                    }
                    None => self.region(r),
                };
                out.push_str(&text);
            }
            out.push(')');
        }
        if !op.attrs.is_empty() {
            out.push(' ');
            let _ = write_dict(&mut out, &op.attrs);
        }
        let ins: Vec<String> = op.operands.iter().map(|v| v.ty.to_string()).collect();
        let outs: Vec<String> = op.results.iter().map(|v| v.ty.to_string()).collect();
        out.push_str(&format!(" : ({}) -> ", ins.join(", ")));
        if outs.len() == 1 && !outs[0].starts_with('(') {
            out.push_str(&outs[0]);
        } else {
            out.push_str(&format!("({})", outs.join(", ")));
        }
        out
    }

    fn block(&mut self, b: &Block, idx: usize, out: &mut String) {
        if idx > 0 || !b.args.is_empty() {
            let args: Vec<String> = b
                .args
                .iter()
                .map(|a| format!("{}: {}", self.name_of(a), a.ty))
                .collect();
            out.push_str(&"  ".repeat(self.indent.saturating_sub(1)));
            if args.is_empty() {
                out.push_str(&format!("^bb{idx}:\n"));
            } else {
                out.push_str(&format!("^bb{idx}({}):\n", args.join(", ")));
            }
        }
        for op in &b.ops {
            let text = self.op(op);
            out.push_str(&self.pad());
            out.push_str(&text);
            out.push('\n');
        }
    }
}

impl CustomPrinter for Printer<'_> {
    fn value(&mut self, v: &Value) -> String {
        self.name_of(v)
    }
    fn region(&mut self, r: &Region) -> String {
        if r.blocks
            .iter()
            .all(|b| b.ops.is_empty() && b.args.is_empty())
        {
            return "{\n".to_string() + &self.pad() + "}";
        }
        let mut out = String::from("{\n");
        self.indent += 1;
        for (i, b) in r.blocks.iter().enumerate() {
            self.block(b, i, &mut out);
        }
        self.indent -= 1;
        out.push_str(&self.pad());
        out.push('}');
        out
    }
}
