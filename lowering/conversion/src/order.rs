//! Position orders: the lowering lays every buffer dimension out in one *order* (a permutation
//! of its positions) and works with boxes in that order, so a rank's zigzag or striped shard is
//! one box like a contiguous one, and a ring passes it in one transfer.
//!
//! The dimensions bound to the same axes (Q's and O's query positions, K's and V's key
//! positions) share an order, taken from the first of their placements during the loops (the
//! last reshard at the kernel's start, else the declaration; inputs first) that is not
//! contiguous: the order lists that placement's shards one after the other (`mercury_commir::placement::dim_order`). A
//! placement whose shards are boxes in that order is *aligned*: the lowering treats it as the
//! contiguous placement over the same levels. Any other placement is moved point to point
//! (`permute.rs`). Orders never change what is computed: inputs and outputs are read and
//! written at their real positions (`FromGlobalPieces`, output pieces), and causal attention
//! masks the real positions of each block (`causal.rs`). Dimensions whose axes also appear in
//! another dimension (grouped-query heads) keep the identity.

use mercury_commir::placement::{dim_order, dim_runs, Run};
use mercury_commir::{DimBinding, Kernel, Placement, Role, Stmt};
use mercury_ir::Diagnostic;
use mercury_plan::Region;
use std::collections::HashMap;
use std::rc::Rc;

/// A permutation of a dimension's positions: runs of consecutive positions, in the order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Order {
    /// (first position, length) of each run, in the order.
    runs: Vec<Run>,
    /// Where each run starts in the order.
    starts: Vec<usize>,
    /// Run indices by first position.
    by_position: Vec<usize>,
}

/// A run of a tile in a dimension: where it starts in the tile (or slot), its first position
/// in the buffer, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub at: usize,
    pub pos: usize,
    pub len: usize,
}

impl Order {
    fn new(runs: Vec<Run>) -> Order {
        let mut starts = Vec::with_capacity(runs.len());
        let mut acc = 0;
        for r in &runs {
            starts.push(acc);
            acc += r.1;
        }
        let mut by_position: Vec<usize> = (0..runs.len()).collect();
        by_position.sort_by_key(|i| runs[*i].0);
        Order {
            runs,
            starts,
            by_position,
        }
    }

    /// The positions of order indices `[lo, lo + len)`, as segments (`at` relative to `lo`).
    pub fn positions(&self, lo: usize, len: usize) -> Vec<Seg> {
        let mut out = Vec::new();
        let mut i = self.starts.partition_point(|s| *s <= lo).saturating_sub(1);
        let (mut at, end) = (lo, lo + len);
        while at < end && i < self.runs.len() {
            let (p, rl) = self.runs[i];
            let off = at - self.starts[i];
            let take = (rl - off).min(end - at);
            out.push(Seg {
                at: at - lo,
                pos: p + off,
                len: take,
            });
            at += take;
            i += 1;
        }
        out
    }

    /// The order indices of positions `[lo, lo + len)`, as segments (`pos` is the order
    /// index, `at` the offset from `lo`).
    pub fn indices(&self, lo: usize, len: usize) -> Vec<Seg> {
        let mut out = Vec::new();
        let k = self
            .by_position
            .partition_point(|i| self.runs[*i].0 <= lo)
            .saturating_sub(1);
        let (mut at, end) = (lo, lo + len);
        for &i in &self.by_position[k..] {
            if at >= end {
                break;
            }
            let (p, rl) = self.runs[i];
            if p + rl <= at {
                continue;
            }
            let off = at - p;
            let take = (rl - off).min(end - at);
            out.push(Seg {
                at: at - lo,
                pos: self.starts[i] + off,
                len: take,
            });
            at += take;
        }
        out
    }
}

/// Segments of `[lo, lo + len)` of a dimension under `order` (`None`: the identity).
pub(crate) fn positions(order: Option<&Order>, lo: usize, len: usize) -> Vec<Seg> {
    match order {
        Some(o) => o.positions(lo, len),
        None => vec![Seg {
            at: 0,
            pos: lo,
            len,
        }],
    }
}

/// Order indices of positions `[lo, lo + len)` (`None`: the identity).
fn indices(order: Option<&Order>, lo: usize, len: usize) -> Vec<Seg> {
    match order {
        Some(o) => o.indices(lo, len),
        None => vec![Seg {
            at: 0,
            pos: lo,
            len,
        }],
    }
}

/// The order of every buffer dimension (`None`: the identity).
#[derive(Debug, Default)]
pub(crate) struct Orders {
    dims: HashMap<String, Vec<Option<Rc<Order>>>>,
}

/// A box of one buffer in two coordinates: `logical` (in the lowering's orders) and
/// `global` (real positions), with its place `at` in a slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Piece {
    pub logical: Region,
    pub global: Region,
    pub at: Region,
}

impl Orders {
    /// Chooses the orders of `k`'s dimensions (see the module documentation); `begin` lists
    /// the placements the kernel's start reshards to.
    pub fn choose(k: &Kernel, begin: &[(String, Placement)]) -> Orders {
        let mesh = &k.mesh.shape;
        // Axis -> the dimension bindings that use it, to find coupled dimensions.
        let mut uses: HashMap<&str, Vec<&Vec<String>>> = HashMap::new();
        for b in &k.buffers {
            for d in &b.dims {
                if let DimBinding::Axes(ax) = d {
                    for a in ax {
                        uses.entry(a.as_str()).or_default().push(ax);
                    }
                }
            }
        }
        let coupled =
            |ax: &Vec<String>| ax.iter().any(|a| uses[a.as_str()].iter().any(|o| *o != ax));
        // Where each buffer is while the loops run: its last reshard at the start, else its
        // declaration; inputs first.
        let during = k
            .buffers
            .iter()
            .filter(|b| b.role != Role::Out)
            .chain(k.buffers.iter().filter(|b| b.role == Role::Out))
            .map(|b| {
                let p = begin
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == b.name)
                    .map_or_else(|| b.placement(), |(_, p)| p.clone());
                (b, p)
            });
        let mut chosen: HashMap<Vec<String>, Option<Rc<Order>>> = HashMap::new();
        for (b, p) in during {
            for (d, bind) in b.dims.iter().enumerate() {
                let DimBinding::Axes(ax) = bind else { continue };
                if chosen.contains_key(ax) || p.dim_is_contiguous(d) {
                    continue;
                }
                let order = (!coupled(ax))
                    .then(|| Rc::new(Order::new(dim_order(k.dim_size(bind), &p.dim(d), mesh))));
                chosen.insert(ax.clone(), order);
            }
        }
        let dims = k
            .buffers
            .iter()
            .map(|b| {
                let per_dim = b
                    .dims
                    .iter()
                    .map(|d| match d {
                        DimBinding::Axes(ax) => chosen.get(ax).cloned().flatten(),
                        DimBinding::Fixed(_) => None,
                    })
                    .collect();
                (b.name.clone(), per_dim)
            })
            .collect();
        Orders { dims }
    }

    /// The order of dimension `d` of `buffer` (`None`: the identity).
    pub fn of(&self, buffer: &str, d: usize) -> Option<&Order> {
        self.dims.get(buffer)?.get(d)?.as_deref()
    }

    /// Whether placement `p` of `buffer` (`shape`) is aligned: every rank's shard is, in the
    /// lowering's orders, the box the contiguous placement over the same levels gives it.
    pub fn aligned(&self, buffer: &str, p: &Placement, shape: &[usize], mesh: &[usize]) -> bool {
        (0..shape.len()).all(|d| {
            let levels = p.dim(d);
            let order = self.of(buffer, d);
            if order.is_none() && p.dim_is_contiguous(d) {
                return true;
            }
            let parts: usize = levels.iter().map(|(l, _)| mesh[*l]).product();
            let len = shape[d] / parts.max(1);
            let mut coords = vec![0; mesh.len()];
            (0..parts).all(|idx| {
                let mut rest = idx;
                for &(l, _) in levels.iter().rev() {
                    coords[l] = rest % mesh[l];
                    rest /= mesh[l];
                }
                let mut held = dim_runs(shape[d], &levels, mesh, &coords);
                let mut want: Vec<Run> = positions(order, idx * len, len)
                    .iter()
                    .map(|s| (s.pos, s.len))
                    .collect();
                held.sort_unstable();
                want.sort_unstable();
                merge(&held) == merge(&want)
            })
        })
    }

    /// The real boxes of a box `bx` of `buffer` in the lowering's orders, each with its place
    /// relative to `bx`.
    pub fn global_pieces(&self, buffer: &str, bx: &Region) -> Vec<Piece> {
        let per_dim: Vec<Vec<Seg>> = (0..bx.rank())
            .map(|d| positions(self.of(buffer, d), bx.offset[d], bx.extent[d]))
            .collect();
        product(&per_dim)
            .into_iter()
            .map(|segs| Piece {
                logical: Region {
                    offset: segs.iter().zip(&bx.offset).map(|(s, o)| o + s.at).collect(),
                    extent: segs.iter().map(|s| s.len).collect(),
                },
                global: Region {
                    offset: segs.iter().map(|s| s.pos).collect(),
                    extent: segs.iter().map(|s| s.len).collect(),
                },
                at: Region {
                    offset: segs.iter().map(|s| s.at).collect(),
                    extent: segs.iter().map(|s| s.len).collect(),
                },
            })
            .collect()
    }

    /// The boxes a rank holds of `buffer` (`shape`) under placement `p` (real positions, in
    /// the rank's local order), in the lowering's orders: each piece's logical and real box and
    /// its place in a slot holding the shard in local order. Also returns that slot's shape.
    pub fn shard_pieces(
        &self,
        buffer: &str,
        p: &Placement,
        shape: &[usize],
        mesh: &[usize],
        coords: &[usize],
    ) -> (Vec<Piece>, Vec<usize>) {
        let mut per_dim = Vec::new();
        let mut slot_shape = Vec::new();
        for (d, &size) in shape.iter().enumerate() {
            let runs = dim_runs(size, &p.dim(d), mesh, coords);
            let mut segs = Vec::new();
            let mut local = 0;
            for (start, len) in runs {
                for s in indices(self.of(buffer, d), start, len) {
                    segs.push((
                        Seg {
                            at: local + s.at,
                            pos: s.pos,
                            len: s.len,
                        },
                        start + s.at,
                    ));
                }
                local += len;
            }
            slot_shape.push(local);
            per_dim.push(segs);
        }
        let pieces = product(&per_dim)
            .into_iter()
            .map(|segs| Piece {
                logical: Region {
                    offset: segs.iter().map(|(s, _)| s.pos).collect(),
                    extent: segs.iter().map(|(s, _)| s.len).collect(),
                },
                global: Region {
                    offset: segs.iter().map(|(_, g)| *g).collect(),
                    extent: segs.iter().map(|(s, _)| s.len).collect(),
                },
                at: Region {
                    offset: segs.iter().map(|(s, _)| s.at).collect(),
                    extent: segs.iter().map(|(s, _)| s.len).collect(),
                },
            })
            .collect();
        (pieces, slot_shape)
    }
}

/// Runs sorted by position, adjacent ones merged.
fn merge(runs: &[Run]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for &r in runs {
        mercury_commir::placement::push_run(&mut out, r);
    }
    out
}

/// Every combination of one entry per dimension, the last dimension fastest.
fn product<T: Clone>(per_dim: &[Vec<T>]) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = vec![vec![]];
    for choices in per_dim {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                choices.iter().map(move |c| {
                    let mut v = prefix.clone();
                    v.push(c.clone());
                    v
                })
            })
            .collect();
    }
    out
}

/// Most runs of positions one rank may hold in one dimension under a placement: every run is
/// a piece of its slot's initialisation, of a permutation and of the output.
pub(crate) const MAX_RUNS: usize = 512;

/// Checks that no placement of `k` (declared or a reshard's) gives a rank more than
/// [`MAX_RUNS`] runs of positions in one dimension: a striped placement with a small block
/// over a long dimension would make a plan of millions of transfers.
pub(crate) fn check_runs(k: &Kernel) -> Result<(), Diagnostic> {
    let mesh = &k.mesh.shape;
    let n: usize = mesh.iter().product();
    let reshards = k.body.iter().filter_map(|s| match s {
        Stmt::Reshard { buffer, to, loc } => Some((buffer.as_str(), to.clone(), loc)),
        _ => None,
    });
    let declared = k
        .buffers
        .iter()
        .map(|b| (b.name.as_str(), b.placement(), &b.loc));
    for (name, p, loc) in declared.chain(reshards) {
        if p.is_contiguous() {
            continue;
        }
        let Some(b) = k.buffer(name) else { continue };
        for (d, size) in k.shape(b).into_iter().enumerate() {
            let levels = p.dim(d);
            if p.dim_is_contiguous(d) {
                continue;
            }
            let most = (0..n)
                .map(|r| dim_runs(size, &levels, mesh, &mercury_plan::coords_of(mesh, r)).len())
                .max()
                .unwrap_or(0);
            if most > MAX_RUNS {
                return Err(Diagnostic::error(
                    loc.clone(),
                    format!(
                        "'@{name}' placed {} gives a rank {most} runs of positions in dimension {d}; the lowering moves at most {MAX_RUNS} (use a larger striped block)",
                        p.to_custom()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The placements the reshards at the kernel's start move buffers to, in order.
pub(crate) fn begin_placements(k: &Kernel) -> Vec<(String, Placement)> {
    k.body
        .iter()
        .take_while(|s| matches!(s, Stmt::Reshard { .. }))
        .filter_map(|s| match s {
            Stmt::Reshard { buffer, to, .. } => Some((buffer.clone(), to.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_maps_both_ways() {
        // Zigzag over 4 ranks of 16 positions: 0 1 14 15 | 2 3 12 13 | 4 5 10 11 | 6 7 8 9.
        let o = Order::new(dim_order(16, &[(0, mercury_commir::Split::Zigzag)], &[4]));
        assert_eq!(
            o.positions(2, 4),
            vec![
                Seg {
                    at: 0,
                    pos: 14,
                    len: 2
                },
                Seg {
                    at: 2,
                    pos: 2,
                    len: 2
                }
            ]
        );
        assert_eq!(
            o.indices(12, 4),
            vec![
                Seg {
                    at: 0,
                    pos: 6,
                    len: 2
                },
                Seg {
                    at: 2,
                    pos: 2,
                    len: 2
                }
            ]
        );
        assert_eq!(o.indices(0, 16).iter().map(|s| s.len).sum::<usize>(), 16);
    }
}
