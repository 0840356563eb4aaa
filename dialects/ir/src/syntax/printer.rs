//! Prints IR in custom form (where an op has an assembly hook or a format) or generic form,
//! so that upstream `mlir-opt` reads it back as the same IR: result groups as `%0:2` and
//! `%0#1`, successors as `^bbN` of their region, properties of unregistered ops as
//! `<{...}>`, a region of one empty block as `^bb0:`, and (`debuginfo`) every location.
//!
//! Value names are scoped per region as upstream's `SSANameState` (mlir/lib/IR/AsmPrinter.cpp)
//! scopes them: every value of a region (its blocks' arguments, then its ops' results, block
//! by block) is named before anything nested in it, and each nested region starts from the
//! counters its parent region ended with, so every function of a module starts again at
//! `%arg0` and `%0`, and two sibling regions may use the same names. Entry block arguments
//! without a name are `%argN`; other unnamed values, arguments of other blocks included, are
//! `%N`. A name the source gave is kept (a digit-only one is renumbered); where it would shadow
//! a name visible in an enclosing region it takes a suffix `_K`, `K` from a counter scoped as
//! the others, as upstream's `uniqueValueName` does.

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
    /// Name every value by number (`%0`, `%arg0`; scoped per region as upstream numbers
    /// them), ignoring the names the source gave: two modules that differ only in their value
    /// names print the same (the schedule cache's key).
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
        counters: Counters::default(),
        regions: HashMap::new(),
        made: Vec::new(),
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
    /// The names visible where printing is: those of the regions it is in.
    used: HashSet<String>,
    /// The naming counters of the region being named or printed.
    counters: Counters,
    /// Regions named before their op printed (keyed by address): where their counters ended
    /// and the names they define.
    regions: HashMap<usize, NamedRegion>,
    /// Every name [`Printer::fresh`] made, in order (a region's are split off when it is named).
    made: Vec<String>,
    indent: usize,
    /// Dialects whose ops print without their prefix here, innermost last.
    default_dialects: Vec<&'static str>,
}

/// The counters a region's names are drawn from (upstream's `nextValueID`, `nextArgumentID`,
/// `nextConflictID`).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    next: usize,
    next_arg: usize,
    next_conflict: usize,
}

/// A region whose values are named: the counters after its last value, and its names.
#[derive(Debug)]
struct NamedRegion {
    end: Counters,
    names: Vec<String>,
}

/// A region's key in [`Printer::regions`].
fn region_key(r: &Region) -> usize {
    std::ptr::from_ref(r) as usize
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

/// Whether an op's results print as one group `%x:2` (used as `%x#k`): they came from one
/// (each has the hint `x`), or none has a name of its own (as upstream names the results of
/// an op: one number for all). Results the source named each (`%o, %lse = `) keep their names.
fn one_group(op: &Operation, numbered: bool) -> bool {
    let first = &op.results[0].name;
    let own_name = |r: &Value| {
        r.name
            .as_deref()
            .is_some_and(|h| !h.chars().all(|c| c.is_ascii_digit()))
    };
    numbered
        || !op.results.iter().any(own_name)
        || (first.is_some() && op.results.iter().all(|r| &r.name == first))
}

impl<'r> Printer<'r> {
    /// A fresh name from a hint (or a number), unique among the visible names; `arg` for an
    /// entry block argument (`argN`).
    fn fresh(&mut self, hint: Option<&str>, arg: bool) -> String {
        let c = &mut self.counters;
        let name = match hint {
            Some(h) if !self.opts.numbered && !h.chars().all(|c| c.is_ascii_digit()) => {
                let base = sanitize(h);
                let mut cand = base.clone();
                while self.used.contains(&cand) {
                    cand = format!("{base}_{}", c.next_conflict);
                    c.next_conflict += 1;
                }
                cand
            }
            _ if arg => loop {
                let cand = format!("arg{}", c.next_arg);
                c.next_arg += 1;
                if !self.used.contains(&cand) {
                    break cand;
                }
            },
            _ => loop {
                let cand = c.next.to_string();
                c.next += 1;
                if !self.used.contains(&cand) {
                    break cand;
                }
            },
        };
        self.used.insert(name.clone());
        self.made.push(name.clone());
        name
    }

    /// The name a value prints as (`%x`, `%0#1`); one not named yet (a value of no region
    /// printed, or not defined at all) gets a name now.
    pub(crate) fn name_of(&mut self, v: &Value) -> String {
        if let Some(n) = self.names.get(&v.id) {
            return n.clone();
        }
        let n = format!("%{}", self.fresh(v.name.as_deref(), false));
        self.names.insert(v.id, n.clone());
        n
    }

    /// The name of an entry block argument (`%argN` when the source gave none).
    pub(crate) fn arg_name(&mut self, v: &Value) -> String {
        if let Some(n) = self.names.get(&v.id) {
            return n.clone();
        }
        let n = format!("%{}", self.fresh(v.name.as_deref(), true));
        self.names.insert(v.id, n.clone());
        n
    }

    /// Names an op's results: one group (`%x:2`, as the source wrote it) is `%x#k`, else each
    /// its own name.
    fn name_results(&mut self, op: &Operation) {
        if op.results.is_empty() || self.names.contains_key(&op.results[0].id) {
            return;
        }
        if op.results.len() > 1 && one_group(op, self.opts.numbered) {
            let base = self.fresh(op.results[0].name.as_deref(), false);
            for (k, r) in op.results.iter().enumerate() {
                self.names.insert(r.id, format!("%{base}#{k}"));
            }
        } else {
            for r in &op.results {
                self.name_of(r);
            }
        }
    }

    /// Names every value of region `r` (not of the regions nested in it), from the current
    /// counters, which it advances; returns the names it made visible.
    fn name_region(&mut self, r: &Region) -> Vec<String> {
        let start = self.made.len();
        for (i, b) in r.blocks.iter().enumerate() {
            for a in &b.args {
                if i == 0 {
                    self.arg_name(a);
                } else {
                    self.name_of(a);
                }
            }
            for op in &b.ops {
                self.name_results(op);
            }
        }
        self.made.split_off(start)
    }

    /// Names the values of each region of `op` before it prints (its syntax may print a
    /// region's arguments before the region, as `func.func` does): each region from the
    /// counters of the region `op` is in, as upstream's `SSANameState` does.
    fn name_regions_of(&mut self, op: &Operation) {
        let base = self.counters;
        for r in &op.regions {
            if self.regions.contains_key(&region_key(r)) {
                continue;
            }
            self.counters = base;
            let names = self.name_region(r);
            for n in &names {
                self.used.remove(n);
            }
            let end = self.counters;
            self.regions
                .insert(region_key(r), NamedRegion { end, names });
        }
        self.counters = base;
    }

    /// Enters region `key` to print it: its names become visible and its counters current
    /// (a region not named beforehand is named now). Returns what [`Printer::leave`] restores.
    fn enter(&mut self, key: usize, r: &Region) -> (Counters, Vec<String>) {
        let saved = self.counters;
        let names = match self.regions.get(&key) {
            Some(named) => {
                self.counters = named.end;
                for n in &named.names {
                    self.used.insert(n.clone());
                }
                named.names.clone()
            }
            None => self.name_region(r),
        };
        (saved, names)
    }

    fn leave(&mut self, (saved, names): (Counters, Vec<String>)) {
        for n in &names {
            self.used.remove(n);
        }
        self.counters = saved;
    }

    /// The text of a result list, `%0 = `, `%a, %b = `, a group `%a:2 = `.
    fn results(&mut self, op: &Operation) -> String {
        if op.results.is_empty() {
            return String::new();
        }
        self.name_results(op);
        let first = self.name_of(&op.results[0]);
        if let Some(base) = first.strip_suffix("#0") {
            return format!("{base}:{} = ", op.results.len());
        }
        let names: Vec<String> = op.results.iter().map(|r| self.name_of(r)).collect();
        format!("{} = ", names.join(", "))
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
        self.name_regions_of(op);
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
            // The ops inside keep the default dialect of where this op is (a generic op sets
            // none, as upstream's printGenericOp): `builtin.module` inside a `func.func` keeps
            // its prefix, which the parser needs there.
            for (i, r) in op.regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let text = match terminator {
                    Some(t) => {
                        let mut with_term = r.clone();
                        with_term.entry_mut().ops.push(Operation::new(t));
                        self.region_keyed(region_key(r), &with_term, true, None)
                    }
                    // An empty body of a single-block op (`module {}`) is one empty block,
                    // which the generic form spells `^bb0:` as MLIR prints it: `({\n})` is a
                    // region of no block, which upstream refuses for `builtin.module`.
                    None if def.is_some_and(|d| d.has_trait(Trait::SingleBlock))
                        && r.blocks.is_empty() =>
                    {
                        format!("{{\n{}^bb0:\n{}}}", self.pad(), self.pad())
                    }
                    None => self.region_with(r, true, None),
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

    /// A region; `entry_label` prints the entry block's label when it has arguments (a
    /// custom syntax that defines them itself passes false); `dialect` is a default dialect
    /// for the ops inside.
    pub(crate) fn region_with(
        &mut self,
        r: &Region,
        entry_label: bool,
        dialect: Option<&'static str>,
    ) -> String {
        self.region_keyed(region_key(r), r, entry_label, dialect)
    }

    /// [`Printer::region_with`] of `r`, named as the region `key` (a copy of that region with
    /// its implicit terminator prints with the original's names and counters).
    fn region_keyed(
        &mut self,
        key: usize,
        r: &Region,
        entry_label: bool,
        dialect: Option<&'static str>,
    ) -> String {
        if r.blocks.is_empty() {
            return "{\n".to_string() + &self.pad() + "}";
        }
        let scope = self.enter(key, r);
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
        self.leave(scope);
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
    fn region(&mut self, r: &Region, dialect: Option<&'static str>) -> String {
        // A custom form's body of empty blocks prints as `{}` (its op's syntax reads that
        // back as the block it needs).
        if r.blocks
            .iter()
            .all(|b| b.ops.is_empty() && b.args.is_empty())
        {
            return "{\n".to_string() + &self.pad() + "}";
        }
        self.region_with(r, true, dialect)
    }
}

#[cfg(test)]
mod tests {
    use super::{print_op, PrintOptions};
    use crate::ir::{module, Operation, Region, Value};
    use crate::registry::Registry;
    use crate::types::Type;

    /// An unregistered op `test.<name>` with one result named `hint`, using `uses`.
    fn op(name: &str, hint: &str, uses: &[&Value]) -> Operation {
        let mut o = Operation::new(format!("test.{name}"));
        o.operands = uses.iter().map(|v| (*v).clone()).collect();
        o.results.push(Value::new(Type::i(32), Some(hint)));
        o
    }

    /// Names a pass gave twice (which no parsed input has) take upstream's `_K` suffixes,
    /// from one counter; a nested region sees the names around it, its sibling's are free.
    #[test]
    fn names_that_would_shadow_take_suffixes() {
        let a = op("a", "x", &[]);
        let b = op("b", "x", &[&a.results[0]]);
        let mut c = op("c", "y", &[]);
        for name in ["r1", "r2"] {
            let mut r = Region::default();
            r.entry_mut().ops.push(op(name, "x", &[]));
            c.regions.push(r);
        }
        let m = module(vec![a, b, c]);
        let mut reg = Registry::new();
        reg.allow_unregistered = true;
        let text = print_op(&reg, &m, PrintOptions::default());
        for want in [
            "%x = \"test.a\"()",
            "%x_0 = \"test.b\"(%x)",
            "%x_1 = \"test.r1\"()",
            "%x_1 = \"test.r2\"()",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}
