//! Prints IR in custom form (where an op has an assembly hook or a format) or generic form,
//! so that upstream `mlir-opt` reads it back as the same IR: result groups as `%0:2` and
//! `%0#1`, successors as `^bbN` of their region, properties of unregistered ops as
//! `<{...}>`, a region of one empty block as `^bb0:`, and (`debuginfo`) every location.

use crate::attributes::write_dict;
use crate::diag::Location;
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
    /// Print the location of every op and block argument (`--mlir-print-debuginfo`).
    pub debuginfo: bool,
}

/// Prints an op (usually a module) followed by a newline.
pub fn print_op(registry: &Registry, op: &Operation, opts: PrintOptions) -> String {
    let mut p = Printer {
        registry,
        opts,
        names: HashMap::new(),
        used: HashSet::new(),
        next: 0,
        next_arg: 0,
        indent: 0,
        default_dialects: Vec::new(),
    };
    let mut out = p.op(op);
    out.push('\n');
    out
}

/// The printer; hand-written op syntaxes (`registry::OpAsm`) print through it.
pub(crate) struct Printer<'r> {
    pub(crate) registry: &'r Registry,
    pub(crate) opts: PrintOptions,
    names: HashMap<ValueId, String>,
    used: HashSet<String>,
    next: usize,
    next_arg: usize,
    indent: usize,
    /// Dialects whose ops print without their prefix here, innermost last.
    default_dialects: Vec<&'static str>,
}

/// A value name hint as an MLIR suffix id (`[a-zA-Z$._-][a-zA-Z0-9$._-]*` or digits).
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
    } else if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("v{s}")
    } else {
        s
    }
}

/// Whether an op's results came from one result group (`%x:2`: each has the hint `x`): they
/// print as one group again.
fn shares_one_name(op: &Operation) -> bool {
    let first = &op.results[0].name;
    first.is_some() && op.results.iter().all(|r| &r.name == first)
}

impl<'r> Printer<'r> {
    /// A fresh name from a hint (or a number), unique in what is printed.
    fn fresh(&mut self, hint: Option<&str>, arg: bool) -> String {
        let name = match hint {
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
            _ if arg => loop {
                let cand = format!("arg{}", self.next_arg);
                self.next_arg += 1;
                if !self.used.contains(&cand) {
                    break cand;
                }
            },
            _ => loop {
                let cand = self.next.to_string();
                self.next += 1;
                if !self.used.contains(&cand) {
                    break cand;
                }
            },
        };
        self.used.insert(name.clone());
        name
    }

    /// The name a value prints as (`%x`, `%0#1`); one not named yet (a value defined later,
    /// in a graph region, or not at all) gets a name now.
    pub(crate) fn name_of(&mut self, v: &Value) -> String {
        if let Some(n) = self.names.get(&v.id) {
            return n.clone();
        }
        let n = format!("%{}", self.fresh(v.name.as_deref(), false));
        self.names.insert(v.id, n.clone());
        n
    }

    /// Names a block argument (`%arg0` when the source gave none).
    pub(crate) fn arg_name(&mut self, v: &Value) -> String {
        if let Some(n) = self.names.get(&v.id) {
            return n.clone();
        }
        let n = format!("%{}", self.fresh(v.name.as_deref(), true));
        self.names.insert(v.id, n.clone());
        n
    }

    /// The text of a result list, `%0 = `, `%a, %b = ` as a group `%a:2 = `.
    fn results(&mut self, op: &Operation) -> String {
        match op.results.len() {
            0 => String::new(),
            1 => format!("{} = ", self.name_of(&op.results[0])),
            _ if self.opts.numbered || !shares_one_name(op) => {
                // Each its own name, as the source named them (`%o, %lse =`).
                let names: Vec<String> = op.results.iter().map(|r| self.name_of(r)).collect();
                format!("{} = ", names.join(", "))
            }
            n => {
                // One group (`%x:2 =`, as written): the uses are `%x#k`.
                let base = match self.names.get(&op.results[0].id) {
                    Some(b) => b.trim_start_matches('%').to_string(),
                    None => self.fresh(op.results[0].name.as_deref(), false),
                };
                for (k, r) in op.results.iter().enumerate() {
                    self.names.insert(r.id, format!("%{base}#{k}"));
                }
                format!("%{base}:{n} = ")
            }
        }
    }

    pub(crate) fn pad(&self) -> String {
        "  ".repeat(self.indent)
    }

    /// ` loc(...)` when printing debug info.
    pub(crate) fn loc_suffix(&self, loc: &Location) -> String {
        if self.opts.debuginfo {
            format!(" loc({})", loc.mlir())
        } else {
            String::new()
        }
    }

    pub(crate) fn op(&mut self, op: &Operation) -> String {
        let mut out = self.results(op);
        let reg = self.registry.lookup(&op.name).cloned();
        let asm = if self.opts.generic {
            None
        } else {
            self.registry.asm(&op.name)
        };
        // An op of the innermost default dialect (`builtin` at the top level) prints without
        // its prefix.
        let short = |name: &str, defaults: &[&str]| -> String {
            if let Some((d, rest)) = name.split_once('.') {
                if defaults.last().copied().unwrap_or("builtin") == d {
                    return rest.to_string();
                }
            }
            name.to_string()
        };
        if let Some(asm) = asm {
            out.push_str(&short(&op.name, &self.default_dialects));
            let body = (asm.print)(op, self);
            if !body.is_empty() {
                out.push(' ');
                out.push_str(&body);
            }
        } else if let Some(format) = reg
            .as_ref()
            .and_then(|r| r.format.clone())
            .filter(|_| !self.opts.generic)
        {
            let def = reg.as_ref().expect("registered").def;
            out.push_str(&short(&op.name, &self.default_dialects));
            let body = print_custom(op, &def, &format, self);
            if !body.is_empty() {
                out.push(' ');
                out.push_str(&body);
            }
        } else {
            out.push_str(&self.generic(op));
        }
        out.push_str(&self.loc_suffix(&op.loc));
        out
    }

    fn generic(&mut self, op: &Operation) -> String {
        let mut out = crate::attributes::quote(&op.name);
        out.push('(');
        let operands: Vec<String> = op.operands.iter().map(|v| self.name_of(v)).collect();
        out.push_str(&operands.join(", "));
        out.push(')');
        if !op.successors.is_empty() {
            let s: Vec<String> = op.successors.iter().map(|i| format!("^bb{i}")).collect();
            out.push_str(&format!("[{}]", s.join(", ")));
        }
        if let Some(p) = &op.properties {
            out.push_str(&format!(" <{p}>"));
        }
        if !op.regions.is_empty() {
            let def = self.registry.lookup(&op.name).map(|r| r.def);
            let terminator = def.and_then(|d| d.implicit_terminator());
            out.push_str(" (");
            // In the generic form no op is written without its dialect.
            let saved = std::mem::take(&mut self.default_dialects);
            for (i, r) in op.regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let text = match terminator {
                    Some(t) => {
                        let mut with_term = r.clone();
                        with_term.entry_mut().ops.push(Operation::new(t));
                        self.region_generic(&with_term)
                    }
                    // An empty body of a single-block op (`module {}`) is one empty block,
                    // which the generic form spells `^bb0:` as MLIR prints it: `({\n})` is a
                    // region of no block, which upstream refuses for `builtin.module`.
                    None if def.is_some_and(|d| d.has_trait(Trait::SingleBlock))
                        && r.blocks.is_empty() =>
                    {
                        format!("{{\n{}^bb0:\n{}}}", self.pad(), self.pad())
                    }
                    None => self.region_generic(r),
                };
                out.push_str(&text);
            }
            self.default_dialects = saved;
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

    /// A region with every block label (the generic form).
    fn region_generic(&mut self, r: &Region) -> String {
        self.region_with(r, true, None)
    }

    /// A region; `entry_label` prints the entry block's label when it has arguments (a
    /// custom syntax that defines them itself passes false); `dialect` is a default dialect
    /// for the ops inside.
    pub(crate) fn region_with(
        &mut self,
        r: &Region,
        entry_label: bool,
        dialect: Option<&'static str>,
    ) -> String {
        if r.blocks.is_empty() {
            return "{\n".to_string() + &self.pad() + "}";
        }
        if let Some(d) = dialect {
            self.default_dialects.push(d);
        }
        let mut out = String::from("{\n");
        self.indent += 1;
        for (i, b) in r.blocks.iter().enumerate() {
            // A region of one empty block keeps it: `^bb0:`.
            let label = i > 0
                || (entry_label && !b.args.is_empty())
                || (r.blocks.len() == 1 && b.ops.is_empty() && b.args.is_empty());
            self.block(b, i, label, &mut out);
        }
        self.indent -= 1;
        if dialect.is_some() {
            self.default_dialects.pop();
        }
        out.push_str(&self.pad());
        out.push('}');
        out
    }

    fn block(&mut self, b: &Block, idx: usize, label: bool, out: &mut String) {
        if label {
            let args: Vec<String> = b
                .args
                .iter()
                .enumerate()
                .map(|(k, a)| {
                    let loc = b
                        .arg_locs
                        .get(k)
                        .map(|l| self.loc_suffix(l))
                        .unwrap_or_default();
                    format!("{}: {}{loc}", self.arg_name(a), a.ty)
                })
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
        // A custom form's body of empty blocks prints as `{}` (its op's syntax reads that
        // back as the block it needs).
        if r.blocks
            .iter()
            .all(|b| b.ops.is_empty() && b.args.is_empty())
        {
            return "{\n".to_string() + &self.pad() + "}";
        }
        self.region_with(r, true, None)
    }
}
