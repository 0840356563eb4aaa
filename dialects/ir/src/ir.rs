//! Operations, regions, blocks and SSA values.
//!
//! The IR is a tree: an operation owns its regions, a region its blocks, a block its
//! operations. SSA values are identified by a process-unique id; each carries its type and an
//! optional name hint (the name it had in the source), used by the printer.

use crate::attributes::Attribute;
use crate::diag::Location;
use crate::types::Type;
use indexmap::IndexMap;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_VALUE: AtomicU32 = AtomicU32::new(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// An SSA value: a block argument or an operation result.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub id: ValueId,
    pub ty: Type,
    pub name: Option<String>,
}

impl Value {
    /// A fresh value of type `ty`.
    pub fn new(ty: Type, name: Option<&str>) -> Value {
        Value {
            id: ValueId(NEXT_VALUE.fetch_add(1, Ordering::Relaxed)),
            ty,
            name: name.map(Into::into),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    pub args: Vec<Value>,
    /// The location of each argument (`^bb0(%a: i32 loc("f":1:2))`); shorter than `args`
    /// where arguments have none.
    pub arg_locs: Vec<Location>,
    pub ops: Vec<Operation>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Region {
    pub blocks: Vec<Block>,
}

impl Region {
    /// A region with one empty block.
    pub fn with_block() -> Region {
        Region {
            blocks: vec![Block::default()],
        }
    }
    pub fn entry(&self) -> Option<&Block> {
        self.blocks.first()
    }
    pub fn entry_mut(&mut self) -> &mut Block {
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
        }
        &mut self.blocks[0]
    }
    /// Operations of the entry block (empty if the region has no block).
    pub fn ops(&self) -> &[Operation] {
        self.blocks.first().map_or(&[], |b| &b.ops)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: String,
    pub operands: Vec<Value>,
    pub results: Vec<Value>,
    pub attrs: IndexMap<String, Attribute>,
    pub regions: Vec<Region>,
    /// Successor blocks, as indices into the blocks of the region that holds this op.
    pub successors: Vec<usize>,
    /// Properties of an op that has no definition here (`"x.y"() <{p = 1}>`); a registered
    /// op keeps its inherent attributes in `attrs`.
    pub properties: Option<Box<Attribute>>,
    pub loc: Location,
}

impl Operation {
    pub fn new(name: impl Into<String>) -> Operation {
        Operation {
            name: name.into(),
            operands: vec![],
            results: vec![],
            attrs: IndexMap::new(),
            regions: vec![],
            successors: vec![],
            properties: None,
            loc: Location::Unknown,
        }
    }
    pub fn with_attr(mut self, k: &str, v: Attribute) -> Operation {
        self.attrs.insert(k.into(), v);
        self
    }
    pub fn with_loc(mut self, loc: Location) -> Operation {
        self.loc = loc;
        self
    }
    pub fn attr(&self, k: &str) -> Option<&Attribute> {
        self.attrs.get(k)
    }
    pub fn set_attr(&mut self, k: &str, v: Attribute) {
        self.attrs.insert(k.into(), v);
    }
    pub fn remove_attr(&mut self, k: &str) -> Option<Attribute> {
        self.attrs.shift_remove(k)
    }
    /// Dialect prefix of the op name (`commir` for `commir.load`).
    pub fn dialect(&self) -> &str {
        self.name.split_once('.').map_or("", |(d, _)| d)
    }
    /// `sym_name` attribute, if any.
    pub fn symbol_name(&self) -> Option<&str> {
        self.attr("sym_name").and_then(|a| a.as_str())
    }
    /// Ops of the entry block of region `i`.
    pub fn body(&self, i: usize) -> &[Operation] {
        self.regions.get(i).map_or(&[], |r| r.ops())
    }
    pub fn body_mut(&mut self, i: usize) -> &mut Vec<Operation> {
        &mut self.regions[i].entry_mut().ops
    }
    /// Pre-order walk over this op and every nested op.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Operation)) {
        f(self);
        for r in &self.regions {
            for b in &r.blocks {
                for op in &b.ops {
                    op.walk(f);
                }
            }
        }
    }
    /// Pre-order mutable walk.
    pub fn walk_mut(&mut self, f: &mut impl FnMut(&mut Operation)) {
        f(self);
        for r in &mut self.regions {
            for b in &mut r.blocks {
                for op in &mut b.ops {
                    op.walk_mut(f);
                }
            }
        }
    }
}

/// A top-level `builtin.module` (the root of everything the tools read and write).
pub fn module(ops: Vec<Operation>) -> Operation {
    let mut m = Operation::new("builtin.module");
    m.regions.push(Region {
        blocks: vec![Block {
            ops,
            ..Block::default()
        }],
    });
    m
}

/// The attribute dictionary type used throughout.
pub type AttrDict = IndexMap<String, Attribute>;
