//! Dependence analysis over a kernel's accesses, as a petgraph graph. An edge joins two
//! accesses to the same buffer that may touch the same element and whose order matters (a
//! store with anything, a reduction with a read, reductions of different kinds); reductions of
//! one kind commute. Each edge records, per enclosing loop axis, whether the two accesses can
//! meet in different iterations of that loop (`carried`).

use mercury_commir::{IndexExpr, Kernel, ReduceKind, Stmt};
use mercury_ir::Location;
use petgraph::graph::DiGraph;

#[derive(Debug, Clone, PartialEq)]
pub enum AccessKind {
    Read,
    Write,
    Reduce(ReduceKind),
}

#[derive(Debug, Clone)]
pub struct AccessNode {
    pub buffer: String,
    pub kind: AccessKind,
    pub indices: Vec<IndexExpr>,
    /// Axes of the enclosing loops, outermost first.
    pub loops: Vec<String>,
    pub loc: Location,
}

#[derive(Debug, Clone)]
pub struct DepEdge {
    /// Loop axes along which the dependence may be carried.
    pub carried: Vec<String>,
}

pub type DepGraph = DiGraph<AccessNode, DepEdge>;

fn conflicts(a: &AccessKind, b: &AccessKind) -> bool {
    match (a, b) {
        (AccessKind::Read, AccessKind::Read) => false,
        (AccessKind::Reduce(x), AccessKind::Reduce(y)) => x != y,
        _ => true,
    }
}

/// True when an index entry pins the loop variable `axis` (the same element implies the same
/// iteration): the entry is injective in `axis`, here the axis itself or the axis shifted.
fn pins(e: &IndexExpr, axis: &str) -> bool {
    match e {
        IndexExpr::Axis(a) => a == axis,
        IndexExpr::Mod(inner, _) => match &**inner {
            IndexExpr::Add(x, y) => {
                (x.as_axis() == Some(axis)) != (y.as_axis() == Some(axis))
                    && (x.axes().len() + y.axes().len() <= 2)
            }
            _ => false,
        },
        _ => false,
    }
}

pub fn build(k: &Kernel) -> DepGraph {
    let mut g = DepGraph::new();
    let mut nodes = Vec::new();
    k.walk(&mut |s, stack| {
        let (acc, kind) = match s {
            Stmt::Load { access, .. } => (access, AccessKind::Read),
            Stmt::Store { access, .. } => (access, AccessKind::Write),
            Stmt::Reduce { access, kind, .. } => (access, AccessKind::Reduce(*kind)),
            _ => return,
        };
        let n = g.add_node(AccessNode {
            buffer: acc.buffer.clone(),
            kind,
            indices: acc.indices.clone(),
            loops: stack.iter().map(|l| l.axis.clone()).collect(),
            loc: acc.loc.clone(),
        });
        nodes.push(n);
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
            let carried: Vec<String> = common
                .into_iter()
                .filter(|x| {
                    let pa = na.indices.iter().position(|e| pins(e, x));
                    let pb = nb.indices.iter().position(|e| pins(e, x));
                    !(pa.is_some()
                        && pa == pb
                        && na.indices[pa.unwrap_or(0)] == nb.indices[pb.unwrap_or(0)])
                })
                .collect();
            g.add_edge(a, b, DepEdge { carried });
        }
    }
    g
}

/// The first dependence carried by both loops `a` and `b` (swapping them could reverse it).
pub fn blocks_interchange<'g>(
    g: &'g DepGraph,
    a: &str,
    b: &str,
) -> Option<(&'g AccessNode, &'g AccessNode)> {
    g.edge_indices().find_map(|e| {
        let w = &g[e];
        let (x, y) = g.edge_endpoints(e)?;
        (w.carried.iter().any(|c| c == a) && w.carried.iter().any(|c| c == b))
            .then(|| (&g[x], &g[y]))
    })
}

/// The first dependence carried by loop `a` (running its iterations concurrently would race).
pub fn carried_by<'g>(g: &'g DepGraph, a: &str) -> Option<(&'g AccessNode, &'g AccessNode)> {
    g.edge_indices().find_map(|e| {
        let (x, y) = g.edge_endpoints(e)?;
        g[e].carried.iter().any(|c| c == a).then(|| (&g[x], &g[y]))
    })
}
