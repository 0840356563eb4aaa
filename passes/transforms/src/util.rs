//! IR helpers shared by the schedule primitives: finding kernels, loops, axes and buffers, and
//! rewriting buffer dimensions, shardings and index lists (through the typed op views of
//! `mercury_commir::ops`).

use mercury_commir::ops::{AccessOp, AxisOp, BufferOp, ForOp, ReshardOp};
use mercury_commir::{AxisKind, DimBinding, ForLoop, IndexExpr, Kernel, Placement, Split};
use mercury_ir::pass::OptionValue;
use mercury_ir::{Diagnostic, Location, Operation, Region};

pub use mercury_commir::pass::{kernel_mut, kernel_names, model};

/// The `commir.buffer` op named `buffer` in a kernel body.
pub fn buffer_op_mut<'a>(kernel: &'a mut Operation, buffer: &str) -> Option<&'a mut Operation> {
    kernel
        .body_mut(0)
        .iter_mut()
        .find(|o| BufferOp::cast(&**o).is_some() && o.symbol_name() == Some(buffer))
}

/// The `commir.axis` op named `axis` in a kernel body, by position.
pub fn axis_position(body: &[Operation], axis: &str) -> Option<usize> {
    body.iter()
        .position(|o| AxisOp::cast(o).is_some() && o.symbol_name() == Some(axis))
}

/// A new `commir.axis` op.
pub fn new_axis(
    name: &str,
    extent: usize,
    kind: AxisKind,
    min_block: usize,
    loc: &Location,
) -> Operation {
    let mut op = Operation::new(AxisOp::<&Operation>::NAME).with_loc(loc.clone());
    let mut v = AxisOp::cast(&mut op).expect("axis");
    v.set_sym_name(name);
    v.set_extent(extent as i64);
    v.set_kind(kind);
    if min_block > 1 {
        v.set_min_block(min_block as i64);
    }
    op
}

/// A new `commir.for` op over `axis` with `body`.
pub fn new_for(axis: &str, body: Vec<Operation>, loc: &Location) -> Operation {
    let mut op = Operation::new(ForOp::<&Operation>::NAME).with_loc(loc.clone());
    ForOp::cast(&mut op).expect("for").set_axis(axis);
    op.regions.push(Region {
        blocks: vec![mercury_ir::Block {
            ops: body,
            ..Default::default()
        }],
    });
    op
}

/// A new `commir.reshard` op.
pub fn new_reshard(buffer: &str, to: &Placement, loc: &Location) -> Operation {
    let mut op = Operation::new(ReshardOp::<&Operation>::NAME).with_loc(loc.clone());
    let mut v = ReshardOp::cast(&mut op).expect("reshard");
    v.set_buffer(buffer);
    v.set_sharding(to.clone());
    op
}

/// Every `commir.buffer` op of a kernel body, as views to rewrite.
pub fn buffers_mut(body: &mut [Operation]) -> impl Iterator<Item = BufferOp<&mut Operation>> {
    body.iter_mut().filter_map(BufferOp::cast)
}

/// The dimensions of a buffer op.
pub fn dims(op: &BufferOp<&mut Operation>) -> Vec<DimBinding> {
    op.dims().unwrap_or_default()
}

/// The placement of a buffer op (replicated when it has no `sharding`).
pub fn placement(op: &BufferOp<&mut Operation>) -> Placement {
    op.sharding()
        .unwrap_or_else(|| Placement::from(vec![vec![]; dims(op).len()]))
}

/// The mesh levels of a buffer op's placement, per dimension.
pub fn sharding(op: &BufferOp<&mut Operation>) -> Vec<Vec<usize>> {
    placement(op).levels
}

/// Sets the mesh levels of a buffer op's placement; the levels it keeps keep their splits.
/// Whether the buffer is an output (`out` or `inout`), whose declared placement is a contract.
pub fn is_output(op: &BufferOp<&mut Operation>) -> bool {
    matches!(
        op.read_role(),
        Ok(Some(
            mercury_commir::Role::Out | mercury_commir::Role::InOut
        ))
    )
}

/// Refuses to change the declared placement of output `b` (`out`, `inout`) from `from` to
/// `to`: a located error naming the buffer and both placements. Inputs and temporaries pass.
pub fn keep_output_contract(
    pass: &str,
    b: &mercury_commir::Buffer,
    to: &Placement,
) -> Result<(), Diagnostic> {
    let from = b.placement();
    if !matches!(
        b.role,
        mercury_commir::Role::Out | mercury_commir::Role::InOut
    ) || from == *to
    {
        return Ok(());
    }
    Err(Diagnostic::error(
        b.loc.clone(),
        format!(
            "{pass}: '@{}' is an output declared as {}; this would deliver it as {} instead (an output's declared placement is a contract: the schedule computes it where its loops put it and delivers it as declared; to compute it elsewhere, reshard it at the start and back at the end)",
            b.name,
            describe(&from),
            describe(to)
        ),
    ))
}

/// A placement as the user writes it on a buffer (`sharding [R, S(0)]`, or `replicated`).
pub fn describe(p: &Placement) -> String {
    if p.levels.iter().all(Vec::is_empty) {
        "replicated (no sharding)".to_string()
    } else {
        format!("'sharding {}'", p.to_custom())
    }
}

pub fn set_sharding(op: &mut BufferOp<&mut Operation>, s: &[Vec<usize>]) {
    let p = Placement::new(s.to_vec(), placement(op).splits);
    set_placement(op, &p);
}

/// Sets the placement of a buffer op; a replicated one is written without `sharding`.
pub fn set_placement(op: &mut BufferOp<&mut Operation>, p: &Placement) {
    if p.levels.iter().all(Vec::is_empty) {
        op.remove_sharding();
    } else {
        op.set_sharding(p.clone());
    }
}

/// Finds the `commir.for` over `axis` anywhere in `ops` (the first, in program order).
pub fn find_for_mut<'a>(ops: &'a mut [Operation], axis: &str) -> Option<&'a mut Operation> {
    find_nth_for_mut(ops, axis, &mut 0)
}

/// Finds the `commir.for` over `axis` that comes after `skip` others over it, in program
/// order (`distribute` leaves several loops over one axis).
pub fn find_nth_for_mut<'a>(
    ops: &'a mut [Operation],
    axis: &str,
    skip: &mut usize,
) -> Option<&'a mut Operation> {
    for op in ops.iter_mut() {
        let Some(f) = ForOp::cast(&*op) else { continue };
        if f.axis().as_deref() == Some(axis) {
            if *skip == 0 {
                return Some(op);
            }
            *skip -= 1;
            continue;
        }
        if let Some(f) = find_nth_for_mut(op.body_mut(0), axis, skip) {
            return Some(f);
        }
    }
    None
}

/// The loops over `axis`, in program order: one, or several after `distribute`.
pub fn loops_over<'a>(m: &'a Kernel, axis: &str) -> Vec<&'a ForLoop> {
    m.loops().into_iter().filter(|l| l.axis == axis).collect()
}

/// The loop over `axis`, if there is one. `pass` is refused (located at the second loop) when
/// `distribute` left several: the pass would otherwise change one of them and leave the others
/// iterating an axis that no longer exists, or treat the nests as one.
pub fn sole_loop<'a>(
    m: &'a Kernel,
    axis: &str,
    pass: &str,
) -> Result<Option<&'a ForLoop>, Diagnostic> {
    match loops_over(m, axis).as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        [first, second, ..] => Err(Diagnostic::error(
            second.loc.clone(),
            format!("{pass}: several loops iterate '@{axis}' (after distribute); apply {pass} before distributing"),
        )
        .with_note(first.loc.clone(), "the first loop is here")),
    }
}

/// Calls `f` on every access op (load, reduce, store) with the axes of its enclosing loops.
pub fn for_each_access_mut(
    ops: &mut [Operation],
    stack: &mut Vec<String>,
    f: &mut dyn FnMut(&mut AccessOp<&mut Operation>, &[String]) -> Result<(), Diagnostic>,
) -> Result<(), Diagnostic> {
    for op in ops.iter_mut() {
        if let Some(axis) = ForOp::cast(&*op).map(|l| l.axis().unwrap_or_default()) {
            stack.push(axis);
            for_each_access_mut(op.body_mut(0), stack, f)?;
            stack.pop();
        } else if let Some(mut a) = AccessOp::cast(op) {
            f(&mut a, stack)?;
        }
    }
    Ok(())
}

/// Rewrites the index list of every access op in `ops` (with the axes of its enclosing
/// loops); `f` returns the new list, or `None` to leave it.
pub fn rewrite_indices(
    ops: &mut [Operation],
    stack: &mut Vec<String>,
    f: &mut dyn FnMut(&[IndexExpr]) -> Option<Vec<IndexExpr>>,
) {
    let _ = for_each_access_mut(ops, stack, &mut |op, _| {
        if let Some(ix) = op.indices().and_then(|ix| f(&ix)) {
            op.set_indices(ix);
        }
        Ok(())
    });
}

/// Whether `op` is a declaration (axis, buffer, document boundaries).
pub fn is_decl(op: &Operation) -> bool {
    mercury_commir::ops::is_decl(op)
}

/// Whether `op` is a `commir.reshard`.
pub fn is_reshard(op: &Operation) -> bool {
    ReshardOp::cast(op).is_some()
}

/// The executable statements of a kernel body (everything but axis and buffer declarations)
/// start at this index.
pub fn first_stmt(kernel: &Operation) -> usize {
    kernel
        .body(0)
        .iter()
        .position(|o| !is_decl(o))
        .unwrap_or(kernel.body(0).len())
}

/// The `placement` option of `parallelize` and `shard`: how the mesh level splits the buffer
/// dimension (`block`, `zigzag`, `striped(B)`); empty keeps a dimension's current split (block
/// for a level it does not have yet).
pub struct PlacementOption(pub Option<Split>);

impl OptionValue for PlacementOption {
    fn parse_option(k: &str, v: &str) -> Result<PlacementOption, String> {
        if v.trim().is_empty() {
            return Ok(PlacementOption(None));
        }
        Split::parse(v)
            .map(|s| PlacementOption(Some(s)))
            .map_err(|e| format!("option '{k}': {e}"))
    }
}

/// An error at `loc` (for `ok_or_else` on a lookup in a kernel model).
pub fn err_at(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

/// A mesh level as a pass option: its number (`level=1`) or its name (`level=gpu`, from the
/// mesh's `names`), resolved against the kernel's mesh when the pass runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    /// The level's number, 0 the slowest.
    Index(usize),
    /// The level's name.
    Name(String),
}

impl mercury_ir::pass::OptionValue for Level {
    fn parse_option(k: &str, v: &str) -> Result<Level, String> {
        let v = v.trim();
        if let Ok(n) = v.parse::<usize>() {
            return Ok(Level::Index(n));
        }
        let word = v
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && v.chars().all(|c| c.is_alphanumeric() || "_-.".contains(c));
        if word {
            Ok(Level::Name(v.to_string()))
        } else {
            Err(format!(
                "option '{k}' must be a mesh level (its number or its name), got '{v}'"
            ))
        }
    }
}

impl Level {
    /// The level's number in `mesh`, or why it does not exist there.
    pub fn resolve(&self, mesh: &mercury_commir::Mesh) -> Result<usize, String> {
        match self {
            Level::Index(l) if *l < mesh.shape.len() => Ok(*l),
            Level::Index(l) => Err(format!(
                "mesh level {l} does not exist: {}",
                mesh.levels_text()
            )),
            Level::Name(n) => mesh.names.iter().position(|x| x == n).ok_or_else(|| {
                let names = if mesh.names.is_empty() {
                    "it names none of its levels".to_string()
                } else {
                    format!("its levels are {}", mesh.names.join(", "))
                };
                let hint = mercury_ir::pass::did_you_mean(n, mesh.names.iter().map(String::as_str))
                    .map(|m| format!("; did you mean '{m}'?"))
                    .unwrap_or_default();
                format!(
                    "mesh '@{}' has no level named '{n}'{hint} ({names})",
                    mesh.name
                )
            }),
        }
    }
}

/// Whether `name` is taken in kernel `m` (an axis, a buffer or the kernel itself).
pub fn name_taken(m: &mercury_commir::Kernel, name: &str) -> bool {
    m.axis(name).is_some() || m.buffer(name).is_some() || m.name == name
}

/// `base`, or `base_1`, `base_2`, ...: the first that no symbol of kernel `m` uses (names a
/// pass makes up never collide with the user's).
pub fn fresh_name(m: &mercury_commir::Kernel, base: &str) -> String {
    if !name_taken(m, base) {
        return base.to_string();
    }
    (1..)
        .map(|k| format!("{base}_{k}"))
        .find(|n| !name_taken(m, n))
        .unwrap_or_else(|| base.to_string())
}
