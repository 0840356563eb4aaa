//! Operations (generic and custom forms, result groups, trailing locations), regions and
//! blocks (labels, arguments with locations, successors resolved to block indices).

use super::{OperandUse, Parser};
use crate::diag::{Diagnostic, Location};
use crate::ir::{Block, Operation, Region, Value};
use crate::syntax::lexer::TokenKind as K;
use crate::types::Type;
use std::collections::HashMap;

/// The blocks of the region being parsed: each name's provisional id, and where each id was
/// first referenced and finally defined.
#[derive(Debug, Default)]
pub(crate) struct BlockTable {
    ids: HashMap<String, usize>,
    /// For each id: the position of its block in the region, once defined.
    defined: Vec<Option<usize>>,
    /// For each id: where it was first used (for "undefined block" errors).
    first_use: Vec<Location>,
}

impl BlockTable {
    /// Where the first block referenced but not defined was first used.
    pub(crate) fn first_undefined(&self) -> Option<Location> {
        let id = self.defined.iter().position(Option::is_none)?;
        Some(self.first_use[id].clone())
    }
}

/// A region argument a custom syntax defines (`func.func @f(%a: i32 loc(...))`).
#[derive(Debug, Clone)]
pub(crate) struct RegionArg {
    pub name: String,
    pub ty: Type,
    pub loc: Option<Location>,
    pub at: Location,
}

impl Parser<'_> {
    /// One operation with its results and trailing location.
    pub(crate) fn operation(&mut self) -> Result<Operation, Diagnostic> {
        self.descend()?;
        let r = self.operation_inner();
        self.ascend();
        r
    }

    fn operation_inner(&mut self) -> Result<Operation, Diagnostic> {
        let start = self.tok.start;
        // `%a, %b:2 =`
        let mut groups: Vec<(String, usize, Location)> = Vec::new();
        if self.is(K::PercentIdent) {
            loop {
                if !self.is(K::PercentIdent) {
                    return Err(self.err("expected valid ssa identifier"));
                }
                let t = self.bump();
                let name = t.text(self.text)[1..].to_string();
                let mut count = 1;
                if self.is(K::Colon) && self.tok.start == t.end {
                    self.bump();
                    if !self.is(K::Integer) {
                        return Err(self.err("expected integer number of results"));
                    }
                    let n = super::attrs::int_magnitude(self.tok_text()).unwrap_or(0);
                    if !(1..=4096).contains(&n) {
                        return Err(self.err("expected named operation to have at least 1 result"));
                    }
                    count = n as usize;
                    self.bump();
                }
                groups.push((name, count, self.loc_at(t.start)));
                if !self.eat(K::Comma) {
                    break;
                }
            }
            if !self.eat(K::Equal) {
                return Err(self.err("expected '=' after SSA name"));
            }
        }
        let nresults: usize = groups.iter().map(|g| g.1).sum();
        let mut op = match self.tok.kind {
            K::String => self.generic_operation()?,
            K::BareIdent => self.custom_operation(nresults)?,
            _ if groups.is_empty() => return Err(self.err("expected operation name in quotes")),
            _ => return Err(self.err("expected operation name in quotes")),
        };
        if op.loc == Location::Unknown {
            op.loc = self.loc_at(start);
        }
        if let Some(l) = self.optional_trailing_location()? {
            // A location without a place in a file keeps the op's place for diagnostics.
            op.loc = if l.line().is_some() {
                l
            } else {
                Location::Written {
                    written: Box::new(l),
                    at: Box::new(op.loc.clone()),
                }
            };
        }
        if op.results.len() != nresults && !groups.is_empty() {
            // Upstream's words for each case.
            let msg = if op.results.is_empty() {
                "cannot name an operation with no results".to_string()
            } else {
                format!(
                    "operation defines {} results but was provided {nresults} to bind",
                    op.results.len()
                )
            };
            return Err(self.err_at(start, msg));
        }
        let mut k = 0;
        for (name, count, at) in groups {
            for v in &mut op.results[k..k + count] {
                v.name = Some(name.clone());
            }
            let mut vals = op.results[k..k + count].to_vec();
            self.define(&name, &mut vals, &at)?;
            op.results[k..k + count].clone_from_slice(&vals);
            k += count;
        }
        Ok(op)
    }

    /// `"name"(operands)[successors] <{properties}> (regions) {attrs} : type`.
    fn generic_operation(&mut self) -> Result<Operation, Diagnostic> {
        let name_tok = self.tok;
        let name = self.string_value()?;
        if name.is_empty() {
            return Err(self.err_at(name_tok.start, "empty operation name is invalid"));
        }
        let loc = self.loc_at(name_tok.start);
        let mut op = Operation::new(name.clone()).with_loc(loc);
        let reg = self.registry.lookup(&name).cloned();
        self.expect(K::LParen, "'(' to start operand list")?;
        let mut uses = Vec::new();
        self.comma_list(K::RParen, ")", |p| {
            uses.push(p.operand_use()?);
            Ok(())
        })?;
        if self.eat(K::LSquare) {
            let mut succ = Vec::new();
            self.comma_list(K::RSquare, "]", |p| {
                succ.push(p.block_reference()?);
                Ok(())
            })?;
            op.successors = succ;
        }
        if self.eat(K::Less) {
            let props = self.attribute()?;
            self.expect(K::Greater, "'>' to close properties")?;
            match (props, &reg) {
                (crate::Attribute::Dict(d), Some(_)) => op.attrs.extend(d),
                (p, _) => op.properties = Some(Box::new(p)),
            }
        }
        if self.is(K::LParen) {
            self.bump();
            loop {
                op.regions.push(self.region(&[], false, None)?);
                if self.eat(K::Comma) {
                    continue;
                }
                self.expect(K::RParen, "')' to end region list")?;
                break;
            }
        }
        if self.is(K::LBrace) {
            let d = self.attr_dict()?;
            for (k, v) in d {
                op.attrs.insert(k, v);
            }
        }
        self.expect(K::Colon, "':' followed by operation type")?;
        let ty_at = self.tok.start;
        let ty = self.type_()?;
        let Type::Function { inputs, results } = ty else {
            return Err(self.err_at(ty_at, "expected function type"));
        };
        if inputs.len() != uses.len() {
            return Err(self.err_at(
                ty_at,
                format!(
                    "expected {} operand type{} but had {}",
                    uses.len(),
                    if uses.len() == 1 { "" } else { "s" },
                    inputs.len()
                ),
            ));
        }
        for (u, t) in uses.iter().zip(&inputs) {
            let v = self.resolve(u, t)?;
            op.operands.push(v);
        }
        if let Some(t) = reg.as_ref().and_then(|r| r.def.implicit_terminator()) {
            for region in &mut op.regions {
                for block in &mut region.blocks {
                    if block.ops.last().is_some_and(|o| {
                        o.name == t && o.operands.is_empty() && o.results.is_empty()
                    }) {
                        block.ops.pop();
                    }
                }
            }
        }
        op.results = results.into_iter().map(|t| Value::new(t, None)).collect();
        Ok(op)
    }

    /// The registered op a custom-form name stands for: the name itself, or (without a
    /// dialect prefix) an op of the innermost default dialect (`builtin` outside any op that
    /// sets one), as upstream resolves it.
    pub(crate) fn resolve_op_name(&self, name: &str) -> Option<String> {
        if self.registry.lookup(name).is_some() {
            return Some(name.to_string());
        }
        if name.contains('.') {
            return None;
        }
        // The innermost default dialect (`builtin` at the top level).
        let d = self.default_dialects.last().copied().unwrap_or("builtin");
        let full = format!("{d}.{name}");
        self.registry.lookup(&full).map(|_| full)
    }

    fn custom_operation(&mut self, nresults: usize) -> Result<Operation, Diagnostic> {
        let name_tok = self.tok;
        let written = name_tok.text(self.text);
        let loc = self.loc_at(name_tok.start);
        let Some(name) = self.resolve_op_name(written) else {
            // Upstream MLIR prints the implicit terminator that our generic form spells out
            // (`transform.yield`, a registered op there) in its custom form, bare: it is that
            // generic op, which the op whose region it ends drops again.
            if nresults == 0
                && self
                    .registry
                    .ops()
                    .any(|d| d.implicit_terminator() == Some(written))
            {
                self.bump();
                return Ok(Operation::new(written).with_loc(loc));
            }
            if let Some((d, _)) = written.split_once('.') {
                if !self.registry.dialect_registered(d) {
                    return Err(
                        self.err_here(format!("Dialect `{d}' not found for custom op '{written}'"))
                    );
                }
                return Err(self.err_here(format!("custom op '{written}' is unknown")));
            }
            let tried = self.default_dialects.last().copied().unwrap_or("builtin");
            return Err(self.err_here(format!(
                "custom op '{written}' is unknown (tried '{tried}.{written}' as well)"
            )));
        };
        self.bump();
        let reg = self.registry.lookup(&name).cloned().expect("resolved");
        let mut op = if let Some(asm) = self.registry.asm(&name) {
            let mut op = Operation::new(name.clone()).with_loc(loc.clone());
            (asm.parse)(self, &mut op, nresults)?;
            op
        } else if let Some(format) = reg.format.as_ref() {
            crate::syntax::format_parse::parse_custom(
                self,
                &reg.def,
                format,
                nresults,
                loc.clone(),
            )?
        } else {
            return Err(self.err_at(
                name_tok.start,
                format!("'{name}' has no custom assembly; use the generic form"),
            ));
        };
        op.loc = loc;
        Ok(op)
    }

    // ---- regions and blocks -------------------------------------------------------------

    /// A region `{ ... }`. `args` are the entry block's arguments a custom syntax defined;
    /// `shadowing` opens a new name scope, where names from outside are not seen and may be
    /// defined again (upstream's `enableNameShadowing`, which only some custom parsers pass:
    /// none of builtin, func and arith, nor the generic form, even for an op isolated from
    /// above, whose uses of outer values the verifier refuses); `dialect` is a default dialect
    /// for the ops inside.
    pub(crate) fn region(
        &mut self,
        args: &[RegionArg],
        shadowing: bool,
        dialect: Option<&'static str>,
    ) -> Result<Region, Diagnostic> {
        if let Some(d) = dialect {
            self.default_dialects.push(d);
        }
        self.push_scope(shadowing);
        let saved = std::mem::take(&mut self.blocks);
        let r = self.region_body(args);
        self.blocks = saved;
        let popped = self.pop_scope(shadowing);
        if dialect.is_some() {
            self.default_dialects.pop();
        }
        let region = r?;
        popped?;
        Ok(region)
    }

    fn region_body(&mut self, args: &[RegionArg]) -> Result<Region, Diagnostic> {
        self.expect(K::LBrace, "'{' to begin a region")?;
        let mut region = Region::default();
        let mut names: Vec<Option<usize>> = Vec::new(); // provisional id of each block
        if self.eat(K::RBrace) {
            if !args.is_empty() {
                let mut entry = Block::default();
                self.check_entry_args(args)?;
                self.define_args(&mut entry, args)?;
                region.blocks.push(entry);
            }
            return Ok(region);
        }
        if !args.is_empty() && self.is(K::CaretIdent) {
            return Err(self.err_here("invalid block name in region with named arguments"));
        }
        if !self.is(K::CaretIdent) {
            let mut entry = Block::default();
            self.check_entry_args(args)?;
            self.define_args(&mut entry, args)?;
            self.block_ops(&mut entry)?;
            region.blocks.push(entry);
            names.push(None);
        }
        while self.is(K::CaretIdent) {
            let t = self.bump();
            let label = t.text(self.text)[1..].to_string();
            let id = self.block_id(&label, self.loc_at(t.start));
            if self.blocks.defined[id].is_some() {
                return Err(self.err_at(t.start, format!("redefinition of block '^{label}'")));
            }
            self.blocks.defined[id] = Some(region.blocks.len());
            let mut block = Block::default();
            if self.eat(K::LParen) {
                let mut parsed = Vec::new();
                self.comma_list(K::RParen, ")", |p| {
                    if !p.is(K::PercentIdent) {
                        return Err(p.err("expected SSA operand"));
                    }
                    let a = p.bump();
                    p.expect(K::Colon, "':' and type for SSA operand")?;
                    let ty = p.type_()?;
                    let loc = p.optional_trailing_location()?;
                    parsed.push(RegionArg {
                        name: a.text(p.text)[1..].to_string(),
                        ty,
                        loc,
                        at: p.loc_at(a.start),
                    });
                    Ok(())
                })?;
                self.define_args(&mut block, &parsed)?;
            }
            self.expect(K::Colon, "':' after block name")?;
            self.block_ops(&mut block)?;
            region.blocks.push(block);
            names.push(Some(id));
        }
        if !self.eat(K::RBrace) {
            return Err(self.err("expected '}' to end a region"));
        }
        // Every referenced block must be defined; successors become block positions.
        if let Some(at) = self.blocks.first_undefined() {
            return Err(Diagnostic::error(at, "reference to an undefined block"));
        }
        let map: Vec<usize> = self.blocks.defined.iter().map(|d| d.unwrap_or(0)).collect();
        for b in &mut region.blocks {
            for op in &mut b.ops {
                for s in &mut op.successors {
                    *s = map[*s];
                }
            }
        }
        Ok(region)
    }

    /// Refuses entry block arguments a custom syntax read (`func.func @f(%a: i32)`) whose
    /// name is already defined or used where the region is, as upstream refuses them.
    fn check_entry_args(&mut self, args: &[RegionArg]) -> Result<(), Diagnostic> {
        for a in args {
            if let Some(prev) = self.reference_loc(&a.name) {
                return Err(Diagnostic::error(
                    a.at.clone(),
                    format!("region entry argument '%{}' is already in use", a.name),
                )
                .with_note(prev, "previously referenced here"));
            }
        }
        Ok(())
    }

    fn define_args(&mut self, block: &mut Block, args: &[RegionArg]) -> Result<(), Diagnostic> {
        for a in args {
            let mut v = [Value::new(a.ty.clone(), Some(&a.name))];
            self.define(&a.name, &mut v, &a.at)?;
            let [v] = v;
            block.args.push(v);
            block
                .arg_locs
                .push(a.loc.clone().unwrap_or_else(|| a.at.clone()));
        }
        Ok(())
    }

    fn block_ops(&mut self, block: &mut Block) -> Result<(), Diagnostic> {
        while !self.is(K::CaretIdent) && !self.is(K::RBrace) {
            if self.is(K::Eof) {
                return Err(self.err("expected '}' to end a region"));
            }
            block.ops.push(self.operation()?);
        }
        Ok(())
    }

    /// The provisional id of block `label` in the region being parsed.
    fn block_id(&mut self, label: &str, at: Location) -> usize {
        if let Some(id) = self.blocks.ids.get(label) {
            return *id;
        }
        let id = self.blocks.defined.len();
        self.blocks.ids.insert(label.to_string(), id);
        self.blocks.defined.push(None);
        self.blocks.first_use.push(at);
        id
    }

    /// `^bb1` as a successor: its provisional id (a block position once the region ends).
    pub(crate) fn block_reference(&mut self) -> Result<usize, Diagnostic> {
        if !self.is(K::CaretIdent) {
            return Err(self.err("expected block name"));
        }
        let t = self.bump();
        let label = t.text(self.text)[1..].to_string();
        Ok(self.block_id(&label, self.loc_at(t.start)))
    }

    /// Resolves operands read before their types were known.
    pub(crate) fn resolve_all(
        &mut self,
        uses: &[OperandUse],
        types: &[Type],
    ) -> Result<Vec<Value>, Diagnostic> {
        uses.iter()
            .zip(types)
            .map(|(u, t)| self.resolve(u, t))
            .collect()
    }
}
