//! Tile shapes: what every tile value of a kernel holds, checked before anything is lowered.
//!
//! A load's tile covers, per buffer dimension, the whole range of the axes no enclosing loop
//! picks (its *atoms*) at the block the looped axes select (its *at*: one index per looped
//! slot). A patch's contract (`contract`) relates its operands' dimensions, rejects tiles that
//! do not fit it, derives its results' tiles, and records over which loops a result is only a
//! partial result (a contraction split by a loop: gemm's `k`, attention's key positions) and
//! which reduction combines the partials. A `commir.reduce` must put a value into a tile of the
//! same shape with the reduction its partials need; a `commir.store` must write a tile of the
//! same shape and never a partial result.

use crate::attrs::DimBinding;
use crate::expr::IndexExpr;
use crate::model::{Axis, Buffer, ReduceKind};
use std::fmt;

/// A run of elements along one dimension of a tile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Atom {
    /// The whole range of an axis (name, extent).
    Axis(String, usize),
    /// A dimension of fixed size.
    Fixed(usize),
}

impl Atom {
    /// Number of elements.
    pub fn size(&self) -> usize {
        match self {
            Atom::Axis(_, n) | Atom::Fixed(n) => *n,
        }
    }
}

/// How one looped slot of a buffer dimension selects its block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    /// The axis of the slot.
    pub slot: String,
    /// The index, as written (`@k0`, `(@k0 + @n0) mod 4`).
    pub index: String,
    /// The loop that walks every block of the slot exactly once while the other loops stay
    /// put: `x` for the index `@x` or `(@x + @p) mod E` (E the extent of x); `None` for any
    /// other index.
    pub step: Option<String>,
}

/// One dimension of a tile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileDim {
    /// What the dimension covers, outermost first.
    pub atoms: Vec<Atom>,
    /// The looped slots of the buffer dimension, outermost first.
    pub at: Vec<At>,
}

impl TileDim {
    /// Number of elements (saturating; buffers are checked to fit in 64 bits).
    pub fn size(&self) -> usize {
        self.atoms
            .iter()
            .fold(1usize, |a, x| a.saturating_mul(x.size()))
    }
}

/// The shape of a tile value, and whether it is only a partial result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tile {
    pub dims: Vec<TileDim>,
    /// Loops over which the value is one of several partial results, with the reduction that
    /// combines them.
    pub partial: Vec<(String, ReduceKind)>,
}

impl Tile {
    /// The tile `indices` select in `buf`; `looped` are the axes of the enclosing loops.
    /// The access must be valid (one index per slot, looped slots outermost).
    pub fn of_access(buf: &Buffer, indices: &[IndexExpr], looped: &[&str], axes: &[Axis]) -> Tile {
        let extent = |a: &str| axes.iter().find(|x| x.name == a).map_or(1, |x| x.extent);
        let mut slot = 0;
        let mut dims = Vec::new();
        for d in &buf.dims {
            match d {
                DimBinding::Fixed(n) => dims.push(TileDim {
                    atoms: vec![Atom::Fixed(usize::try_from(*n).unwrap_or(usize::MAX))],
                    at: vec![],
                }),
                DimBinding::Axes(ax) => {
                    let mut td = TileDim {
                        atoms: vec![],
                        at: vec![],
                    };
                    for a in ax {
                        let Some(e) = indices.get(slot) else { break };
                        slot += 1;
                        let whole =
                            e.as_axis() == Some(a.as_str()) && !looped.contains(&a.as_str());
                        if whole {
                            td.atoms.push(Atom::Axis(a.clone(), extent(a)));
                        } else {
                            td.at.push(At {
                                slot: a.clone(),
                                index: e.to_custom(),
                                step: step_of(e, looped, &extent),
                            });
                        }
                    }
                    dims.push(td);
                }
            }
        }
        Tile {
            dims,
            partial: vec![],
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims
            .iter()
            .fold(1usize, |a, d| a.saturating_mul(d.size()))
    }

    /// Every atom, outermost first.
    fn atoms(&self) -> Vec<Atom> {
        self.dims.iter().flat_map(|d| d.atoms.clone()).collect()
    }

    /// The tile without its last dimension (a log-sum-exp accumulator's shape).
    pub fn without_last(&self) -> Tile {
        Tile {
            dims: self.dims[..self.dims.len().saturating_sub(1)].to_vec(),
            partial: self.partial.clone(),
        }
    }

    /// Whether `self` holds the same elements in the same order as `other` (fixed sizes match
    /// any run of the same size; units are ignored).
    pub fn same_shape(&self, other: &Tile) -> bool {
        atoms_match(&self.atoms(), &other.atoms())
    }
}

/// The loop that walks the blocks of a slot indexed by `e` (see [`At::step`]).
fn step_of(e: &IndexExpr, looped: &[&str], extent: &dyn Fn(&str) -> usize) -> Option<String> {
    match e {
        IndexExpr::Axis(x) if looped.contains(&x.as_str()) => Some(x.clone()),
        // `(x + p + ... + c) mod m` (a shifted loop, `shift{offset}` adds the constant): for
        // fixed other loops it runs through x's m blocks once each, so x steps over them.
        IndexExpr::Mod(inner, m) => {
            let mut terms = Vec::new();
            flatten_sum(inner, &mut terms);
            let (first, rest) = terms.split_first()?;
            let IndexExpr::Axis(x) = first else {
                return None;
            };
            let mut seen = vec![x.as_str()];
            let others_ok = rest.iter().all(|t| match t {
                IndexExpr::Const(_) => true,
                IndexExpr::Axis(p)
                    if looped.contains(&p.as_str()) && !seen.contains(&p.as_str()) =>
                {
                    seen.push(p.as_str());
                    true
                }
                _ => false,
            });
            (!rest.is_empty()
                && others_ok
                && looped.contains(&x.as_str())
                && usize::try_from(*m).ok() == Some(extent(x)))
            .then(|| x.clone())
        }
        _ => None,
    }
}

/// The terms of a sum, left to right.
fn flatten_sum<'a>(e: &'a IndexExpr, out: &mut Vec<&'a IndexExpr>) {
    match e {
        IndexExpr::Add(a, b) => {
            flatten_sum(a, out);
            flatten_sum(b, out);
        }
        t => out.push(t),
    }
}

/// Whether two atom sequences cover the same elements in the same order: axes must agree by
/// name, a fixed size matches any run of atoms with the same product; units are skipped.
pub fn atoms_match(a: &[Atom], b: &[Atom]) -> bool {
    let a: Vec<&Atom> = a.iter().filter(|x| x.size() != 1).collect();
    let b: Vec<&Atom> = b.iter().filter(|x| x.size() != 1).collect();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if let (Atom::Axis(x, _), Atom::Axis(y, _)) = (a[i], b[j]) {
            if x != y {
                return false;
            }
            i += 1;
            j += 1;
            continue;
        }
        let (mut pa, mut pb) = (a[i].size() as u128, b[j].size() as u128);
        i += 1;
        j += 1;
        while pa != pb {
            if pa < pb {
                let Some(x) = a.get(i) else { return false };
                pa = pa.saturating_mul(x.size() as u128);
                i += 1;
            } else {
                let Some(y) = b.get(j) else { return false };
                pb = pb.saturating_mul(y.size() as u128);
                j += 1;
            }
        }
    }
    i == a.len() && j == b.len()
}

impl fmt::Display for TileDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.atoms.is_empty() {
            return write!(f, "1");
        }
        for (i, a) in self.atoms.iter().enumerate() {
            if i > 0 {
                write!(f, " * ")?;
            }
            match a {
                Atom::Axis(n, _) => write!(f, "{}", crate::expr::axis_ref(n))?,
                Atom::Fixed(n) => write!(f, "{n}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Tile {
    /// `[@i, 8] (64 x 8)`: what each dimension covers, then the sizes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        let sizes: Vec<String> = self.dims.iter().map(|d| d.size().to_string()).collect();
        write!(f, "[{}] ({})", dims.join(", "), sizes.join(" x "))
    }
}

/// The name of a patch operand in messages.
fn nth(names: &[&str], i: usize) -> String {
    names
        .get(i)
        .map_or_else(|| format!("operand {i}"), |s| s.to_string())
}

/// Checks the operands of patch `kernel` against its contract and returns its results' tiles.
pub fn contract(kernel: &str, inputs: &[&Tile]) -> Result<Vec<Tile>, String> {
    match kernel {
        "gemm" => gemm(inputs),
        "attention" => attention(inputs),
        "attention_bwd" => attention_bwd(inputs),
        other => Err(format!("no tile contract for patch '{other}'")),
    }
}

/// `C[m.., n..] = A[m.., k] B[k, n..]`: A's last dimension is contracted with the leading
/// dimensions of B of the same size; the product is linear, so a partial sum in either operand
/// stays one in the result, and a split `k` makes the result a partial sum over its loop.
fn gemm(t: &[&Tile]) -> Result<Vec<Tile>, String> {
    let names = ["A", "B"];
    let (a, b) = (t[0], t[1]);
    let mut partial = merged_partials(t, &names, ReduceKind::Add, "gemm")?;
    let ka = a
        .dims
        .last()
        .ok_or("gemm: operand A has no dimension to contract")?;
    let want = ka.size();
    let layout = || {
        format!(
            "gemm: A's last dimension ({ka}, {want} elements) is contracted with the leading dimensions of B, but B is a {b} tile (B must be laid out [k, n])"
        )
    };
    // B's contracted part: its shortest prefix of `want` elements, plus the unit dimensions
    // that carry the rest of A's blocks of k.
    let mut bk = 0;
    let mut got = 1usize;
    while got < want {
        let d = b.dims.get(bk).ok_or_else(layout)?;
        got = got.saturating_mul(d.size());
        bk += 1;
    }
    if got != want {
        return Err(layout());
    }
    while b.dims[..bk].iter().map(|d| d.at.len()).sum::<usize>() < ka.at.len()
        && b.dims.get(bk).is_some_and(|d| d.size() == 1)
    {
        bk += 1;
    }
    let b_atoms: Vec<Atom> = b.dims[..bk].iter().flat_map(|d| d.atoms.clone()).collect();
    if !atoms_match(&ka.atoms, &b_atoms) {
        let bdims: Vec<String> = b.dims[..bk].iter().map(|d| d.to_string()).collect();
        return Err(format!(
            "gemm: A's last dimension covers {ka} but B's leading dimension covers {}: the contracted dimension must be the same (B must be laid out [k, n]; a transposed [n, k] operand is not supported)",
            bdims.join(", ")
        ));
    }
    let b_at: Vec<At> = b.dims[..bk].iter().flat_map(|d| d.at.clone()).collect();
    if ka
        .at
        .iter()
        .map(|x| &x.index)
        .ne(b_at.iter().map(|x| &x.index))
    {
        return Err(format!(
            "gemm: A and B pick different blocks of the contracted dimension (A at [{}], B at [{}])",
            indices(&ka.at),
            indices(&b_at)
        ));
    }
    add_split(
        &mut partial,
        &ka.at,
        ReduceKind::Add,
        "gemm",
        "the contracted dimension k",
    )?;
    let mut dims = a.dims[..a.dims.len() - 1].to_vec();
    dims.extend(b.dims[bk..].iter().cloned());
    Ok(vec![Tile { dims, partial }])
}

/// Attention on `[b, h, s, d]` or `[h, s, d]` tiles: q, k and v share the batch; k and v
/// share their heads and key positions; the query heads are the key/value heads followed by
/// the group (grouped-query attention); q and k share the head dim, which is contracted whole
/// (the q.k product and its scale need all of it); the key positions are contracted through
/// the softmax, so a split over them makes the result partial, merged with `lse_merge`. The
/// output takes v's head dim.
fn attention(t: &[&Tile]) -> Result<Vec<Tile>, String> {
    let names = ["q", "k", "v"];
    let (q, k, v) = (t[0], t[1], t[2]);
    for (i, x) in t.iter().enumerate() {
        if let Some((l, _)) = x.partial.first() {
            return Err(format!(
                "attention: {} is a partial result (split over loop '{}'); attention needs complete operands",
                nth(&names, i),
                crate::expr::axis_ref(l)
            ));
        }
    }
    let r = q.dims.len();
    if !(r == 3 || r == 4) || k.dims.len() != r || v.dims.len() != r {
        return Err(format!(
            "attention: tiles must all be [batch, heads, sequence, head_dim] or all [heads, sequence, head_dim]; got q {q}, k {k}, v {v}"
        ));
    }
    if r == 4 {
        for (x, nm) in [(k, "k"), (v, "v")] {
            if !same_dim(&q.dims[0], &x.dims[0]) {
                return Err(format!(
                    "attention: q and {nm} must share the batch dimension; q's covers {} at [{}], {nm}'s covers {} at [{}]",
                    q.dims[0],
                    indices(&q.dims[0].at),
                    x.dims[0],
                    indices(&x.dims[0].at)
                ));
            }
        }
    }
    let (h, s, d) = (r - 3, r - 2, r - 1);
    if !same_dim(&k.dims[h], &v.dims[h]) {
        return Err(format!(
            "attention: k and v must share their heads dimension (dimension {h}); k's covers {}, v's covers {}",
            k.dims[h], v.dims[h]
        ));
    }
    let qh = &q.dims[h];
    let kh = &k.dims[h];
    let qa: Vec<&Atom> = qh.atoms.iter().filter(|a| a.size() != 1).collect();
    let ka: Vec<&Atom> = kh.atoms.iter().filter(|a| a.size() != 1).collect();
    let prefix = ka.len() <= qa.len()
        && (atoms_match(
            &ka.iter().map(|a| (*a).clone()).collect::<Vec<_>>(),
            &qa[..ka.len()]
                .iter()
                .map(|a| (*a).clone())
                .collect::<Vec<_>>(),
        ))
        && kh.size() > 0
        && qh.size() % kh.size() == 0
        && kh.at.len() <= qh.at.len()
        && kh
            .at
            .iter()
            .zip(&qh.at)
            .all(|(x, y)| x.index == y.index && x.slot == y.slot);
    if !prefix {
        return Err(format!(
            "attention: dimension {h} must hold the heads: k's heads ({kh} at [{}]) must be the leading part of q's ({qh} at [{}]), with q's heads a multiple of k's (grouped-query attention); tiles are [batch, heads, sequence, head_dim]",
            indices(&kh.at),
            indices(&qh.at)
        ));
    }
    if !same_dim(&k.dims[s], &v.dims[s]) {
        return Err(format!(
            "attention: k and v must cover the same key positions (dimension {s}); k's covers {} at [{}], v's covers {} at [{}]",
            k.dims[s],
            indices(&k.dims[s].at),
            v.dims[s],
            indices(&v.dims[s].at)
        ));
    }
    for (x, nm) in [(q, "q"), (k, "k")] {
        if let Some(a) = x.dims[d].at.first() {
            return Err(format!(
                "attention: the head dim of {nm} is split (slot '{}' indexed by '{}'): the q.k product and its 1/sqrt(d) scale need the whole head dim in one patch",
                crate::expr::axis_ref(&a.slot),
                a.index
            ));
        }
    }
    if !atoms_match(&q.dims[d].atoms, &k.dims[d].atoms) {
        return Err(format!(
            "attention: q and k must have the same head dim; q's covers {} ({} elements), k's covers {} ({} elements)",
            q.dims[d],
            q.dims[d].size(),
            k.dims[d],
            k.dims[d].size()
        ));
    }
    let mut partial = vec![];
    add_split(
        &mut partial,
        &k.dims[s].at,
        ReduceKind::LseMerge,
        "attention",
        "the key positions",
    )?;
    let mut o = q.dims[..d].to_vec();
    o.push(v.dims[d].clone());
    let lse = q.dims[..d].to_vec();
    Ok(vec![
        Tile {
            dims: o,
            partial: partial.clone(),
        },
        Tile { dims: lse, partial },
    ])
}

/// Attention backward on the forward's tiles: q, k, v as [`attention`]'s operands; o and do
/// the forward's output tile (q's leading dimensions and v's head dim) and lse its row tile
/// (q without its head dim), all complete (the forward's merged results, not a block's). The
/// gradients have their operands' tiles: dq is a partial sum over the loops that split the
/// key positions (the softmax rows are exact in every key block, since lse covers them all),
/// dk and dv over the loops that split the query positions and the query heads of a group
/// (grouped-query attention sums a key/value head's gradient over its query heads).
fn attention_bwd(t: &[&Tile]) -> Result<Vec<Tile>, String> {
    let names = ["q", "k", "v", "o", "do", "lse"];
    let fwd = attention(&t[..3]).map_err(|m| m.replacen("attention:", "attention_bwd:", 1))?;
    let (q, k, v) = (t[0], t[1], t[2]);
    for (i, x) in t.iter().enumerate().skip(3) {
        if let Some((l, _)) = x.partial.first() {
            return Err(format!(
                "attention_bwd: {} is a partial result (split over loop '{}'); the backward needs the forward's complete output, its gradient and its log-sum-exp",
                nth(&names, i),
                crate::expr::axis_ref(l)
            ));
        }
    }
    for (i, want) in [(3, &fwd[0]), (4, &fwd[0]), (5, &fwd[1])] {
        let x = t[i];
        let same = x.dims.len() == want.dims.len()
            && x.dims.iter().zip(&want.dims).all(|(a, b)| same_dim(a, b));
        if !same {
            let target = if i == 5 {
                "q's tile without its head dim (the forward's log-sum-exp)"
            } else {
                "the forward's output tile: q's with v's head dim"
            };
            return Err(format!(
                "attention_bwd: {} is a {x} tile; it must be {want}, {target}, at the same blocks",
                nth(&names, i)
            ));
        }
    }
    let r = q.dims.len();
    let (h, s) = (r - 3, r - 2);
    let mut dq = vec![];
    add_split(
        &mut dq,
        &k.dims[s].at,
        ReduceKind::Add,
        "attention_bwd",
        "the key positions",
    )?;
    let mut dkv = vec![];
    add_split(
        &mut dkv,
        &q.dims[s].at,
        ReduceKind::Add,
        "attention_bwd",
        "the query positions",
    )?;
    // The query heads past the key/value heads' slots: the group, summed into dk and dv.
    let group_at = &q.dims[h].at[k.dims[h].at.len()..];
    add_split(
        &mut dkv,
        group_at,
        ReduceKind::Add,
        "attention_bwd",
        "the query heads of a key/value group",
    )?;
    let grad = |x: &Tile, partial: &Vec<(String, ReduceKind)>| Tile {
        dims: x.dims.clone(),
        partial: partial.clone(),
    };
    Ok(vec![grad(q, &dq), grad(k, &dkv), grad(v, &dkv)])
}

/// Whether two dimensions cover the same elements at the same block.
pub(crate) fn same_dim(a: &TileDim, b: &TileDim) -> bool {
    atoms_match(&a.atoms, &b.atoms)
        && a.at
            .iter()
            .map(|x| &x.index)
            .eq(b.at.iter().map(|x| &x.index))
}

fn indices(at: &[At]) -> String {
    at.iter()
        .map(|a| a.index.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The partial-result loops of a linear patch's operands, all of reduction `kind`; one loop in
/// two operands would multiply partial sums.
fn merged_partials(
    t: &[&Tile],
    names: &[&str],
    kind: ReduceKind,
    patch: &str,
) -> Result<Vec<(String, ReduceKind)>, String> {
    let mut out: Vec<(String, ReduceKind)> = Vec::new();
    for (i, x) in t.iter().enumerate() {
        for (l, kd) in &x.partial {
            if *kd != kind {
                return Err(format!(
                    "{patch}: {} is a partial result over loop '{}' combined with {}, which {patch} does not preserve",
                    nth(names, i),
                    crate::expr::axis_ref(l),
                    kd.keyword()
                ));
            }
            if out.iter().any(|(m, _)| m == l) {
                return Err(format!(
                    "{patch}: two operands are partial results over the same loop '{}'; their product is not a partial result of the product",
                    crate::expr::axis_ref(l)
                ));
            }
            out.push((l.clone(), *kd));
        }
    }
    Ok(out)
}

/// Records the loops that split a contracted dimension (its looped slots) as partial-result
/// loops of reduction `kind`.
fn add_split(
    partial: &mut Vec<(String, ReduceKind)>,
    at: &[At],
    kind: ReduceKind,
    patch: &str,
    what: &str,
) -> Result<(), String> {
    for a in at {
        let Some(l) = &a.step else {
            return Err(format!(
                "{patch}: {what} is split by the index '{}', which is not a loop over its blocks (the partial results could not be combined)",
                a.index
            ));
        };
        if partial.iter().any(|(m, _)| m == l) {
            return Err(format!(
                "{patch}: loop '{}' splits {what} and an operand at once",
                crate::expr::axis_ref(l)
            ));
        }
        partial.push((l.clone(), kind));
    }
    Ok(())
}
