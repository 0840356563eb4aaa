//! IR helpers shared by the schedule primitives: finding kernels, loops, axes and buffers, and
//! rewriting buffer dimensions, shardings and index lists.

use mercury_commir::attrs::{
    dims_from_attr, dims_to_attr, indices_from_attr, indices_to_attr, sharding_from_attr,
    sharding_to_attr,
};
use mercury_commir::{DimBinding, IndexExpr, Kernel};
use mercury_ir::{Attribute, Diagnostic, Location, Operation, Region};

pub const ACCESS_OPS: [&str; 3] = ["commir.load", "commir.reduce", "commir.store"];

/// The model of a kernel op (re-checked after each rewrite).
pub fn model(module: &Operation, kernel_name: &str) -> Result<Kernel, Diagnostic> {
    let k = module
        .body(0)
        .iter()
        .find(|o| o.name == "commir.kernel" && o.symbol_name() == Some(kernel_name))
        .ok_or_else(|| {
            Diagnostic::error(module.loc.clone(), format!("no kernel '@{kernel_name}'"))
        })?;
    Kernel::from_op(module, k)
}

/// Names of kernels a pass applies to.
pub fn kernel_names(module: &Operation, kernel: &str) -> Result<Vec<String>, Diagnostic> {
    let names: Vec<String> = module
        .body(0)
        .iter()
        .filter(|o| o.name == "commir.kernel")
        .filter_map(|o| o.symbol_name().map(String::from))
        .filter(|n| kernel.is_empty() || n == kernel.trim_start_matches('@'))
        .collect();
    if names.is_empty() {
        return Err(Diagnostic::error(
            module.loc.clone(),
            if kernel.is_empty() {
                "no commir.kernel in the module".to_string()
            } else {
                format!("no commir.kernel named '@{kernel}'")
            },
        ));
    }
    Ok(names)
}

pub fn kernel_mut<'a>(module: &'a mut Operation, name: &str) -> &'a mut Operation {
    module
        .body_mut(0)
        .iter_mut()
        .find(|o| o.name == "commir.kernel" && o.symbol_name() == Some(name))
        .expect("kernel exists")
}

pub fn sym(op: &Operation, attr: &str) -> String {
    op.attr(attr)
        .and_then(|a| a.as_symbol())
        .unwrap_or_default()
        .to_string()
}

pub fn buffer_op_mut<'a>(kernel: &'a mut Operation, buffer: &str) -> Option<&'a mut Operation> {
    kernel
        .body_mut(0)
        .iter_mut()
        .find(|o| o.name == "commir.buffer" && o.symbol_name() == Some(buffer))
}

pub fn new_axis(
    name: &str,
    extent: usize,
    kind: &str,
    min_block: usize,
    loc: &Location,
) -> Operation {
    let mut op = Operation::new("commir.axis").with_loc(loc.clone());
    op.set_attr("sym_name", Attribute::str(name));
    op.set_attr("extent", Attribute::int(extent as i64));
    op.set_attr("kind", Attribute::str(kind));
    if min_block > 1 {
        op.set_attr("min_block", Attribute::int(min_block as i64));
    }
    op
}

pub fn new_for(axis: &str, body: Vec<Operation>, loc: &Location) -> Operation {
    let mut op = Operation::new("commir.for").with_loc(loc.clone());
    op.set_attr("axis", Attribute::sym(axis));
    op.regions.push(Region {
        blocks: vec![mercury_ir::Block {
            args: vec![],
            ops: body,
        }],
    });
    op
}

pub fn dims(op: &Operation) -> Vec<DimBinding> {
    op.attr("dims")
        .and_then(|a| dims_from_attr(a).ok())
        .unwrap_or_default()
}
pub fn set_dims(op: &mut Operation, d: &[DimBinding]) {
    op.set_attr("dims", dims_to_attr(d));
}
pub fn sharding(op: &Operation) -> Vec<Vec<usize>> {
    let n = dims(op).len();
    op.attr("sharding")
        .and_then(|a| sharding_from_attr(a).ok())
        .unwrap_or_else(|| vec![vec![]; n])
}
pub fn set_sharding(op: &mut Operation, s: &[Vec<usize>]) {
    if s.iter().all(Vec::is_empty) {
        op.remove_attr("sharding");
    } else {
        op.set_attr("sharding", sharding_to_attr(s));
    }
}
pub fn indices(op: &Operation) -> Vec<IndexExpr> {
    op.attr("indices")
        .and_then(|a| indices_from_attr(a).ok())
        .unwrap_or_default()
}
pub fn set_indices(op: &mut Operation, ix: &[IndexExpr]) {
    op.set_attr("indices", indices_to_attr(ix));
}

/// Finds the `commir.for` over `axis` anywhere in `ops`.
pub fn find_for_mut<'a>(ops: &'a mut [Operation], axis: &str) -> Option<&'a mut Operation> {
    for op in ops.iter_mut() {
        if op.name == "commir.for" {
            if sym(op, "axis") == axis {
                return Some(op);
            }
            if let Some(f) = find_for_mut(op.body_mut(0), axis) {
                return Some(f);
            }
        }
    }
    None
}

/// Calls `f` on every access op (load, reduce, store) with the axes of its enclosing loops.
pub fn for_each_access_mut(
    ops: &mut [Operation],
    stack: &mut Vec<String>,
    f: &mut dyn FnMut(&mut Operation, &[String]) -> Result<(), Diagnostic>,
) -> Result<(), Diagnostic> {
    for op in ops.iter_mut() {
        if op.name == "commir.for" {
            stack.push(sym(op, "axis"));
            for_each_access_mut(op.body_mut(0), stack, f)?;
            stack.pop();
        } else if ACCESS_OPS.contains(&op.name.as_str()) {
            f(op, stack)?;
        }
    }
    Ok(())
}

/// The executable statements of a kernel body (everything but axis and buffer declarations)
/// start at this index.
pub fn first_stmt(kernel: &Operation) -> usize {
    kernel
        .body(0)
        .iter()
        .position(|o| o.name != "commir.axis" && o.name != "commir.buffer")
        .unwrap_or(kernel.body(0).len())
}

pub fn opt_name(v: &str) -> String {
    v.trim().trim_start_matches('@').to_string()
}
