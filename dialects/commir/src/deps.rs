//! Dependence analysis over a kernel's accesses, as a petgraph graph. An edge joins two
//! accesses to the same buffer that may touch the same element and whose order matters (a
//! store with anything, a reduction with a read, reductions of different kinds); reductions of
//! one kind commute. Each edge records the enclosing loop axes along which the two accesses
//! can meet in different iterations (`carried`): every common loop except those on which two
//! iterations touching the same tile must agree ([`agreeing`]).
//!
//! Used by the schedule passes (`reorder` refuses to swap two loops that both carry a
//! dependence, `parallelize` and `shift` a loop that carries one) and by the lowering (a hand-written
//! parallel loop that carries one is refused). Kennedy & Allen, *Optimizing Compilers for
//! Modern Architectures* (2001), ch. 2-3, with a conservative test: an index that is not
//! provably one to one counts as meeting.

use crate::{IndexExpr, Kernel, ReduceKind, Stmt};
use mercury_ir::{Diagnostic, Location};
use petgraph::graph::DiGraph;

/// How an access uses its buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum AccessKind {
    Read,
    Write,
    Reduce(ReduceKind),
}

/// One load, store or reduction of the kernel.
#[derive(Debug, Clone)]
pub struct AccessNode {
    pub buffer: String,
    pub kind: AccessKind,
    pub indices: Vec<IndexExpr>,
    /// Axes of the enclosing loops, outermost first.
    pub loops: Vec<String>,
    /// The same loops as their positions in [`Kernel::loops`] (pre-order): after
    /// `distribute` several loops iterate one axis.
    pub loop_ids: Vec<usize>,
    pub loc: Location,
}

/// A dependence between two accesses.
#[derive(Debug, Clone)]
pub struct DepEdge {
    /// Loop axes along which the dependence may be carried.
    pub carried: Vec<String>,
}

/// The accesses of a kernel and the dependences between them.
pub type DepGraph = DiGraph<AccessNode, DepEdge>;

fn conflicts(a: &AccessKind, b: &AccessKind) -> bool {
    match (a, b) {
        (AccessKind::Read, AccessKind::Read) => false,
        (AccessKind::Reduce(x), AccessKind::Reduce(y)) => x != y,
        _ => true,
    }
}

/// The terms of a sum, flattened.
fn terms(e: &IndexExpr) -> Vec<&IndexExpr> {
    match e {
        IndexExpr::Add(a, b) => {
            let mut t = terms(a);
            t.extend(terms(b));
            t
        }
        other => vec![other],
    }
}

/// Whether index `e` takes distinct values for distinct values of loop `axis` when every
/// other axis it names is in `fixed` (the same in both iterations): `e` is `@axis` plus a sum
/// of constants and fixed axes (products of them too), optionally `mod M` with `M` at least
/// the extent of `axis`. `(@a + @b) mod 2` determines `@a` only once `@b` is fixed: two
/// iterations (0, 1) and (1, 0) touch the same tile.
pub fn determines(e: &IndexExpr, axis: &str, fixed: &[&str], k: &Kernel) -> bool {
    let (sum, modulus) = match e {
        IndexExpr::Mod(sum, m) => (&**sum, Some(*m)),
        other => (other, None),
    };
    if let Some(m) = modulus {
        if (k.extent(axis) as i64) > m {
            return false;
        }
    }
    let t = terms(sum);
    let own = t.iter().filter(|x| x.as_axis() == Some(axis)).count();
    let rest_fixed = t
        .iter()
        .filter(|x| x.as_axis() != Some(axis))
        .all(|x| x.axes().iter().all(|a| *a != axis && fixed.contains(a)));
    own == 1 && rest_fixed
}

/// Loop axes (of `loops`) on which two iterations must agree when access `a` (indices `ia`)
/// and access `b` (indices `ib`) touch the same tile: found position by position where both
/// use the same index, to a fixed point (an axis once agreed helps determine the next, as in
/// `shift`'s `(@m0 + @k0) mod 4` once `@k0` is pinned by another index).
pub fn agreeing<'l>(
    ia: &[IndexExpr],
    ib: &[IndexExpr],
    loops: &'l [String],
    k: &Kernel,
) -> Vec<&'l str> {
    let mut same: Vec<&str> = Vec::new();
    loop {
        let before = same.len();
        for (ea, eb) in ia.iter().zip(ib) {
            if ea != eb {
                continue;
            }
            for x in loops {
                if !same.contains(&x.as_str()) && determines(ea, x, &same, k) {
                    same.push(x);
                }
            }
        }
        if same.len() == before {
            return same;
        }
    }
}

/// The dependence graph of `k`'s accesses (module docs).
pub fn build(k: &Kernel) -> DepGraph {
    let mut g = DepGraph::new();
    let mut nodes = Vec::new();
    let all = k.loops();
    let id = |l: &crate::ForLoop| {
        all.iter()
            .position(|x| std::ptr::eq(*x, l))
            .unwrap_or(usize::MAX)
    };
    k.walk(&mut |s, stack| {
        // A reduction that keeps its log-sum-exp (`lse @L`) reduces into `@L` too.
        let accesses: Vec<(&crate::Access, AccessKind)> = match s {
            Stmt::Load { access, .. } => vec![(access, AccessKind::Read)],
            Stmt::Store { access, .. } => vec![(access, AccessKind::Write)],
            Stmt::Reduce {
                access, kind, lse, ..
            } => std::iter::once(access)
                .chain(lse)
                .map(|a| (a, AccessKind::Reduce(*kind)))
                .collect(),
            _ => return,
        };
        for (acc, kind) in accesses {
            let n = g.add_node(AccessNode {
                buffer: acc.buffer.clone(),
                kind,
                indices: acc.indices.clone(),
                loops: stack.iter().map(|l| l.axis.clone()).collect(),
                loop_ids: stack.iter().map(|l| id(l)).collect(),
                loc: acc.loc.clone(),
            });
            nodes.push(n);
        }
    });
    for (i, &a) in nodes.iter().enumerate() {
        for &b in &nodes[i..] {
            let (na, nb) = (&g[a], &g[b]);
            if na.buffer != nb.buffer || !conflicts(&na.kind, &nb.kind) {
                continue;
            }
            let common: Vec<String> = na
                .loops
                .iter()
                .filter(|x| nb.loops.contains(x))
                .cloned()
                .collect();
            let agree = agreeing(&na.indices, &nb.indices, &common, k);
            let carried: Vec<String> = common
                .iter()
                .filter(|x| !agree.contains(&x.as_str()))
                .cloned()
                .collect();
            g.add_edge(a, b, DepEdge { carried });
        }
    }
    g
}

/// The first dependence carried by both loops `a` and `b` (swapping them could reverse it).
/// Dependences on a temp private to each iteration of the inner loop `b` ([`private_to`]) do
/// not count: each iteration reads only what it wrote itself, in any order of the two loops.
pub fn blocks_interchange<'g>(
    g: &'g DepGraph,
    k: &Kernel,
    a: &str,
    b: &str,
) -> Option<(&'g AccessNode, &'g AccessNode)> {
    g.edge_indices().find_map(|e| {
        let w = &g[e];
        let (x, y) = g.edge_endpoints(e)?;
        (w.carried.iter().any(|c| c == a)
            && w.carried.iter().any(|c| c == b)
            && !private_at(g, k, &g[x], b))
        .then(|| (&g[x], &g[y]))
    })
}

/// The first dependence carried by loop `a` (running its iterations concurrently would race).
/// Dependences on a temp private to each iteration of that loop ([`private_to`]) do not
/// count: each rank writes and reads its own copy.
pub fn carried_by<'g>(
    g: &'g DepGraph,
    k: &Kernel,
    a: &str,
) -> Option<(&'g AccessNode, &'g AccessNode)> {
    g.edge_indices().find_map(|e| {
        let (x, y) = g.edge_endpoints(e)?;
        (g[e].carried.iter().any(|c| c == a) && !private_at(g, k, &g[x], a)).then(|| (&g[x], &g[y]))
    })
}

/// The first dependence carried by the loop at position `lp` of [`Kernel::loops`] (over
/// axis `a`) between two accesses inside it: what running its iterations in another order
/// (a `shift`) could reverse. Accesses of other loops over the same axis (after `distribute`)
/// run before or after the whole loop and are not reordered by it. Dependences on a temp
/// private to each iteration ([`private_to`]) are not reversed by any order and do not count.
pub fn carried_within<'g>(
    g: &'g DepGraph,
    k: &Kernel,
    a: &str,
    lp: usize,
) -> Option<(&'g AccessNode, &'g AccessNode)> {
    g.edge_indices().find_map(|e| {
        let (x, y) = g.edge_endpoints(e)?;
        let inside = g[x].loop_ids.contains(&lp) && g[y].loop_ids.contains(&lp);
        (inside && g[e].carried.iter().any(|c| c == a) && !private_to(g, k, &g[x].buffer, lp))
            .then(|| (&g[x], &g[y]))
    })
}

/// Whether the buffer of access `n` is a temp private ([`private_to`]) to each iteration of the
/// loop over `axis` around `n`.
fn private_at(g: &DepGraph, k: &Kernel, n: &AccessNode, axis: &str) -> bool {
    n.loops
        .iter()
        .zip(&n.loop_ids)
        .find(|(l, _)| *l == axis)
        .is_some_and(|(_, lp)| private_to(g, k, &n.buffer, *lp))
}

/// Whether `buffer` is a temp private to each iteration of the loop at position `lp` of
/// [`Kernel::loops`]: every access of it in the kernel is inside that loop, and every load or
/// reduction of it is preceded, in the same iteration, by a store with the same indices. Each
/// iteration then reads only what it wrote itself, and no value crosses iterations or leaves
/// the loop: the iterations may run in any order (array privatization: Tu & Padua, *Automatic
/// Array Privatization*, LCPC 1993, with syntactic equality of indices as the covering test).
/// The store must enclose no loop the read is outside of that it depends on: equal indices
/// name the same tile, whichever inner iteration wrote it last.
pub fn private_to(g: &DepGraph, k: &Kernel, buffer: &str, lp: usize) -> bool {
    if k.buffer(buffer).map(|b| b.role) != Some(crate::Role::Temp) {
        return false;
    }
    // Nodes are in program order (a pre-order walk).
    let accesses: Vec<&AccessNode> = g
        .node_indices()
        .map(|n| &g[n])
        .filter(|n| n.buffer == buffer)
        .collect();
    accesses.iter().enumerate().all(|(i, n)| {
        n.loop_ids.contains(&lp)
            && (n.kind == AccessKind::Write
                || accesses[..i].iter().any(|w| {
                    w.kind == AccessKind::Write
                        && w.indices == n.indices
                        && w.indices.iter().all(|e| {
                            e.axes().iter().all(|ax| {
                                // An axis of a loop around the store but not around the
                                // read would name a tile the read does not.
                                n.loops.iter().any(|l| l == ax) || !w.loops.iter().any(|l| l == ax)
                            })
                        })
                }))
    })
}

impl AccessNode {
    /// "store into", "load of" or "reduction into" (for messages).
    pub fn verb(&self) -> &'static str {
        match self.kind {
            AccessKind::Read => "load of",
            AccessKind::Write => "store into",
            AccessKind::Reduce(_) => "reduction into",
        }
    }
}

/// The refusal of running the iterations of loop `axis` on different devices when the
/// dependence `(a, b)` ([`carried_by`]) crosses them, located at `a` (with a note at `b` when
/// it is another access). `lead` starts the message (`"parallelize: "`, or the lowering's
/// description of the loop).
pub fn race_error(lead: &str, axis: &str, dep: (&AccessNode, &AccessNode)) -> Diagnostic {
    dependence_error(
        lead,
        axis,
        dep,
        &format!("run on different devices, those iterations would race (index the buffer by '@{axis}', or keep the loop sequential)"),
    )
}

/// The refusal of running the iterations of loop `axis` in another order on some device (a
/// `shift`) when the dependence `(a, b)` ([`carried_by`]) crosses them; as [`race_error`].
pub fn order_error(lead: &str, axis: &str, dep: (&AccessNode, &AccessNode)) -> Diagnostic {
    dependence_error(
        lead,
        axis,
        dep,
        &format!("in another order (which iteration comes last, or reads what another wrote) the result changes (index the buffer by '@{axis}', or use a reduction)"),
    )
}

fn dependence_error(
    lead: &str,
    axis: &str,
    (a, b): (&AccessNode, &AccessNode),
    consequence: &str,
) -> Diagnostic {
    let same = a.loc == b.loc && a.kind == b.kind;
    let what = if same {
        format!("this {} '@{}' touches the same tile in different iterations of '@{axis}' (its indices do not determine '@{axis}')", a.verb(), a.buffer)
    } else {
        format!(
            "this {} '@{}' and the {} it at the note touch the same tile in different iterations of '@{axis}'",
            a.verb(),
            a.buffer,
            b.verb()
        )
    };
    let d = Diagnostic::error(a.loc.clone(), format!("{lead}{what}: {consequence}"));
    if same {
        d
    } else {
        d.with_note(b.loc.clone(), "the other access is here")
    }
}
