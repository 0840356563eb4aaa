//! Placements: how a buffer is split over the mesh. Per dimension, a list of mesh levels
//! (slowest first: the first level splits the whole dimension, the next splits each of those
//! parts, and so on), and per level *how* it splits ([`Split`]):
//!
//! | split | custom form | coordinate `c` of a level of `m` devices holds |
//! |---|---|---|
//! | block | `S(0)` | block `c` of `m` contiguous blocks |
//! | zigzag | `S(zigzag(0))` | chunks `c` and `2m-1-c` of `2m` (torch context parallel's head-tail load balancing) |
//! | striped | `S(striped(0, 64))` | blocks `c`, `c+m`, `c+2m`, ... of 64 positions (Striped Attention) |
//! | zigzag chunks | `S(zigzag(0, 512))` | chunks `c` and `2m-1-c` of every round of `2m` chunks of 512 positions |
//!
//! A rank keeps the positions it holds in increasing order (its *local order*). Splitting a
//! dimension over several levels applies the splits one after the other to what the previous
//! levels left: `S(zigzag(0), zigzag(1))` on a 2x4 mesh is the zigzag over all 8 ranks
//! ([`flatten_splits`] gives the per-level splits of a split over a flattened group).
//!
//! Placements never change what a kernel computes, only where its data lives; the lowering
//! moves data between placements with point-to-point transfers.

use std::collections::BTreeMap;

/// How one mesh level splits a buffer dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Split {
    /// `m` contiguous blocks; coordinate `c` holds block `c`.
    #[default]
    Block,
    /// Head-tail (zigzag): `2m` chunks; coordinate `c` holds chunks `c` and `2m-1-c`, so every
    /// coordinate gets the same share of a causal mask's work.
    Zigzag,
    /// Round-robin blocks of this many positions: coordinate `c` holds blocks `c`, `c+m`, ...
    Striped(usize),
    /// Zigzag repeated over chunks of this many positions: the dimension is cut into rounds of
    /// `2m` chunks and coordinate `c` holds chunks `c` and `2m-1-c` of every round. Zigzag is
    /// one round; more rounds also balance causal documents shorter than the sequence (a
    /// document spanning a round gives every rank the same share of it), which is what
    /// [`crate::placement`]'s users pick for packed batches of a few long documents.
    ZigzagChunks(usize),
}

impl Split {
    /// The keyword of the custom and generic forms.
    pub fn keyword(self) -> &'static str {
        match self {
            Split::Block => "block",
            Split::Zigzag => "zigzag",
            Split::Striped(_) => "striped",
            Split::ZigzagChunks(_) => "zigzag",
        }
    }

    /// Parses a pass option value: `block`, `zigzag`, `zigzag(C)` / `zigzag:C` (chunks of
    /// `C` positions) or `striped(B)` / `striped:B`.
    pub fn parse(v: &str) -> Result<Split, String> {
        let v = v.trim();
        let arg = |word: &str, what: &str| {
            v.strip_prefix(word)
                .and_then(|r| {
                    r.strip_prefix('(')
                        .and_then(|r| r.strip_suffix(')'))
                        .or_else(|| r.strip_prefix(':'))
                })
                .map(|n| match n.trim().parse::<usize>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!("the {what} of '{v}' must be a positive integer")),
                })
        };
        match (v, arg("striped", "block"), arg("zigzag", "chunk")) {
            ("block" | "contiguous", _, _) => Ok(Split::Block),
            ("zigzag" | "head-tail", _, _) => Ok(Split::Zigzag),
            (_, Some(b), _) => b.map(Split::Striped),
            (_, _, Some(c)) => c.map(Split::ZigzagChunks),
            _ => Err(format!(
                "a placement is block, zigzag, zigzag(C) or striped(B), got '{v}'"
            )),
        }
    }

    /// The spelling of one level under this split: `0`, `zigzag(0)`, `zigzag(0, 512)`,
    /// `striped(0, 64)`.
    pub fn spell(self, level: usize) -> String {
        match self {
            Split::Block => level.to_string(),
            Split::Zigzag => format!("zigzag({level})"),
            Split::Striped(b) => format!("striped({level}, {b})"),
            Split::ZigzagChunks(c) => format!("zigzag({level}, {c})"),
        }
    }

    /// Whether the split is a zigzag (one round or chunked).
    pub fn is_zigzag(self) -> bool {
        matches!(self, Split::Zigzag | Split::ZigzagChunks(_))
    }
}

impl mercury_ir::pass::OptionValue for Split {
    fn parse_option(k: &str, v: &str) -> Result<Split, String> {
        Split::parse(v).map_err(|e| format!("option '{k}': {e}"))
    }
}

/// A buffer's placement: per dimension the mesh levels it is split over (slowest first; empty:
/// replicated) and how each of those levels splits it ([`Split::Block`] unless listed). A level
/// is used by at most one dimension, so one split per level describes the whole placement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Per dimension, the mesh levels it is split over.
    pub levels: Vec<Vec<usize>>,
    /// The non-block splits, by mesh level.
    pub splits: BTreeMap<usize, Split>,
}

impl From<Vec<Vec<usize>>> for Placement {
    /// Block splits on the given levels.
    fn from(levels: Vec<Vec<usize>>) -> Placement {
        Placement {
            levels,
            splits: BTreeMap::new(),
        }
    }
}

impl Placement {
    /// A placement from levels and splits; block entries and splits of levels the placement
    /// does not use are dropped.
    pub fn new(levels: Vec<Vec<usize>>, splits: BTreeMap<usize, Split>) -> Placement {
        let used: Vec<usize> = levels.iter().flatten().copied().collect();
        let splits = splits
            .into_iter()
            .filter(|(l, s)| *s != Split::Block && used.contains(l))
            .collect();
        Placement { levels, splits }
    }

    /// The split of mesh level `l`.
    pub fn split(&self, l: usize) -> Split {
        self.splits.get(&l).copied().unwrap_or_default()
    }

    /// Dimension `d`'s levels with their splits, slowest first.
    pub fn dim(&self, d: usize) -> Vec<(usize, Split)> {
        self.levels
            .get(d)
            .map(|ls| ls.iter().map(|l| (*l, self.split(*l))).collect())
            .unwrap_or_default()
    }

    /// Whether every level splits into contiguous blocks (the only placement before zigzag
    /// and striped ones).
    pub fn is_contiguous(&self) -> bool {
        self.splits.values().all(|s| *s == Split::Block)
    }

    /// Whether dimension `d` is split into contiguous blocks (or not at all).
    pub fn dim_is_contiguous(&self, d: usize) -> bool {
        self.dim(d).iter().all(|(_, s)| *s == Split::Block)
    }

    /// The custom spelling: `[R, S(0), S(zigzag(1))]`.
    pub fn to_custom(&self) -> String {
        let parts: Vec<String> = (0..self.levels.len())
            .map(|d| {
                let ls = self.dim(d);
                if ls.is_empty() {
                    "R".to_string()
                } else {
                    let items: Vec<String> = ls.iter().map(|(l, s)| s.spell(*l)).collect();
                    format!("S({})", items.join(", "))
                }
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }
}

/// Checks that dimension `d` of `size` positions divides under `levels` of `mesh`: each block
/// level into equal blocks, each zigzag level into `2m` equal chunks (chunked: whole rounds of
/// `2m` chunks), each striped level into whole rounds of `m` blocks. `Err` names the level
/// that does not divide.
pub fn check_dim(size: usize, levels: &[(usize, Split)], mesh: &[usize]) -> Result<(), String> {
    let mut seg = size;
    for &(l, s) in levels {
        let m = mesh[l];
        let (unit, what) = match s {
            Split::Block => (m, format!("{m} blocks")),
            Split::Zigzag => (2 * m, format!("the {} zigzag chunks", 2 * m)),
            Split::Striped(0) => return Err("a striped block must be positive".into()),
            Split::Striped(b) => (
                m.saturating_mul(b),
                format!("rounds of {m} striped blocks of {b}"),
            ),
            Split::ZigzagChunks(0) => return Err("a zigzag chunk must be positive".into()),
            Split::ZigzagChunks(c) => (
                m.saturating_mul(2).saturating_mul(c),
                format!("rounds of {} zigzag chunks of {c}", 2 * m),
            ),
        };
        if unit == 0 || !seg.is_multiple_of(unit) {
            return Err(format!(
                "{seg} positions do not divide into {what} of mesh level {l}"
            ));
        }
        seg /= m;
    }
    Ok(())
}

/// A run of consecutive positions: (first position, length).
pub type Run = (usize, usize);

/// Appends positions `[lo, lo + len)` of the concatenation of `runs` (with `starts`, the
/// local position where each run begins) to `out`, merging with its last run when adjacent.
fn select(runs: &[Run], starts: &[usize], lo: usize, len: usize, out: &mut Vec<Run>) {
    let mut i = starts.partition_point(|s| *s <= lo).saturating_sub(1);
    let (mut at, end) = (lo, lo + len);
    while at < end && i < runs.len() {
        let (g, rl) = runs[i];
        let off = at - starts[i];
        let take = (rl - off).min(end - at);
        push_run(out, (g + off, take));
        at += take;
        i += 1;
    }
}

/// Appends a run, merging it with the last one when they are adjacent.
pub fn push_run(out: &mut Vec<Run>, r: Run) {
    if r.1 == 0 {
        return;
    }
    match out.last_mut() {
        Some(last) if last.0 + last.1 == r.0 => last.1 += r.1,
        _ => out.push(r),
    }
}

/// The positions of a dimension of `size` that a rank holds, in its local order, when the
/// dimension is split by `levels` (level, split) of `mesh` and the rank sits at `coords`.
/// The dimension must divide ([`check_dim`]).
pub fn dim_runs(
    size: usize,
    levels: &[(usize, Split)],
    mesh: &[usize],
    coords: &[usize],
) -> Vec<Run> {
    let mut runs = vec![(0, size)];
    let mut seg = size;
    for &(l, s) in levels {
        let (m, c) = (mesh[l], coords[l]);
        let mut starts = Vec::with_capacity(runs.len());
        let mut acc = 0;
        for r in &runs {
            starts.push(acc);
            acc += r.1;
        }
        let mut next = Vec::new();
        match s {
            Split::Block => select(&runs, &starts, c * (seg / m), seg / m, &mut next),
            Split::Zigzag => {
                let ch = seg / (2 * m);
                select(&runs, &starts, c * ch, ch, &mut next);
                select(&runs, &starts, (2 * m - 1 - c) * ch, ch, &mut next);
            }
            Split::Striped(b) => {
                for round in 0..seg / (m * b) {
                    select(&runs, &starts, (round * m + c) * b, b, &mut next);
                }
            }
            Split::ZigzagChunks(ch) => {
                for round in 0..seg / (2 * m * ch) {
                    let at = round * 2 * m * ch;
                    select(&runs, &starts, at + c * ch, ch, &mut next);
                    select(&runs, &starts, at + (2 * m - 1 - c) * ch, ch, &mut next);
                }
            }
        }
        runs = next;
        seg /= m;
    }
    runs
}

/// The *order* of a dimension under a split: every part's positions in its local order, the
/// parts in the order of their index over the levels (the first level most significant). A
/// tile of the dimension's parts in this order is one contiguous box: position `x` of the
/// order is position `order[x]` of the dimension. Contiguous splits give the identity.
pub fn dim_order(size: usize, levels: &[(usize, Split)], mesh: &[usize]) -> Vec<Run> {
    let parts: usize = levels.iter().map(|(l, _)| mesh[*l]).product();
    let mut coords = vec![0; mesh.len()];
    let mut out = Vec::new();
    for idx in 0..parts {
        let mut rest = idx;
        for &(l, _) in levels.iter().rev() {
            coords[l] = rest % mesh[l];
            rest /= mesh[l];
        }
        for r in dim_runs(size, levels, mesh, &coords) {
            push_run(&mut out, r);
        }
    }
    out
}

/// The per-level splits that give `split` over the group of `levels` flattened into one (the
/// first level most significant): zigzag on every level, or striped (chunked zigzag) with each
/// level's block (chunk) the flat one times the devices of the levels after it. Block stays
/// block.
pub fn flatten_splits(split: Split, levels: &[usize], mesh: &[usize]) -> Vec<(usize, Split)> {
    levels
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let s = match split {
                Split::Striped(b) => {
                    Split::Striped(b * levels[i + 1..].iter().map(|x| mesh[*x]).product::<usize>())
                }
                Split::ZigzagChunks(c) => Split::ZigzagChunks(
                    c * levels[i + 1..].iter().map(|x| mesh[*x]).product::<usize>(),
                ),
                other => other,
            };
            (l, s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(runs: &[Run]) -> Vec<usize> {
        runs.iter().flat_map(|(s, l)| *s..s + l).collect()
    }

    #[test]
    fn zigzag_holds_head_and_tail() {
        // 4 ranks, 16 positions: chunks of 2; rank 1 holds chunks 1 and 6.
        let r = dim_runs(16, &[(0, Split::Zigzag)], &[4], &[1]);
        assert_eq!(r, vec![(2, 2), (12, 2)]);
        assert_eq!(
            flat(&dim_order(16, &[(0, Split::Zigzag)], &[4])),
            vec![0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10, 11, 6, 7, 8, 9]
        );
    }

    #[test]
    fn zigzag_chunks_repeat_head_and_tail() {
        // 2 ranks, 16 positions, chunks of 2: rounds of 4 chunks; rank 0 holds chunks 0 and 3
        // of each round.
        let r = dim_runs(16, &[(0, Split::ZigzagChunks(2))], &[2], &[0]);
        assert_eq!(r, vec![(0, 2), (6, 4), (14, 2)]);
        // One round is the zigzag.
        for c in 0..4 {
            assert_eq!(
                dim_runs(16, &[(0, Split::ZigzagChunks(2))], &[4], &[c]),
                dim_runs(16, &[(0, Split::Zigzag)], &[4], &[c])
            );
        }
        assert!(check_dim(24, &[(0, Split::ZigzagChunks(2))], &[4]).is_err());
        assert!(check_dim(32, &[(0, Split::ZigzagChunks(2))], &[4]).is_ok());
        assert!(check_dim(32, &[(0, Split::ZigzagChunks(0))], &[4]).is_err());
    }

    #[test]
    fn striped_is_round_robin() {
        let r = dim_runs(16, &[(0, Split::Striped(2))], &[2], &[1]);
        assert_eq!(r, vec![(2, 2), (6, 2), (10, 2), (14, 2)]);
        assert_eq!(dim_order(8, &[(0, Split::Block)], &[2]), vec![(0, 8)]);
    }

    /// Per-level zigzag and striped splits compose to the flat split over every rank (2, 3
    /// levels), so a re-shaped mesh keeps the same positions on every rank.
    #[test]
    fn hierarchical_splits_equal_flat_ones() {
        for mesh in [vec![2, 4], vec![4, 2], vec![2, 2, 2], vec![3, 2]] {
            let n: usize = mesh.iter().product();
            let levels: Vec<usize> = (0..mesh.len()).collect();
            for split in [
                Split::Zigzag,
                Split::Striped(2),
                Split::ZigzagChunks(2),
                Split::Block,
            ] {
                let size = 8 * n;
                let hier = flatten_splits(split, &levels, &mesh);
                check_dim(size, &hier, &mesh).unwrap();
                for r in 0..n {
                    let mut coords = vec![0; mesh.len()];
                    let mut rest = r;
                    for l in (0..mesh.len()).rev() {
                        coords[l] = rest % mesh[l];
                        rest /= mesh[l];
                    }
                    let want = dim_runs(size, &[(0, split)], &[n], &[r]);
                    assert_eq!(
                        flat(&dim_runs(size, &hier, &mesh, &coords)),
                        flat(&want),
                        "{split:?} on {mesh:?}, rank {r}"
                    );
                }
            }
        }
    }

    #[test]
    fn divisibility() {
        assert!(check_dim(12, &[(0, Split::Zigzag)], &[4]).is_err());
        assert!(check_dim(16, &[(0, Split::Zigzag)], &[4]).is_ok());
        assert!(check_dim(16, &[(0, Split::Striped(4))], &[8]).is_err());
        assert!(check_dim(16, &[(0, Split::Striped(0))], &[2]).is_err());
        assert_eq!(
            check_dim(24, &[(0, Split::Block), (1, Split::Zigzag)], &[2, 4]).unwrap_err(),
            "12 positions do not divide into the 8 zigzag chunks of mesh level 1"
        );
    }

    #[test]
    fn options_and_spelling() {
        assert_eq!(Split::parse("striped(64)"), Ok(Split::Striped(64)));
        assert_eq!(Split::parse("zigzag"), Ok(Split::Zigzag));
        assert_eq!(Split::parse("zigzag(512)"), Ok(Split::ZigzagChunks(512)));
        assert_eq!(Split::parse("zigzag:8"), Ok(Split::ZigzagChunks(8)));
        assert_eq!(
            Split::parse("zigzag(0)"),
            Err("the chunk of 'zigzag(0)' must be a positive integer".into())
        );
        assert_eq!(Split::ZigzagChunks(8).spell(1), "zigzag(1, 8)");
        assert!(Split::parse("striped(0)").is_err());
        assert!(Split::parse("spiral").is_err());
        let p = Placement::new(
            vec![vec![], vec![0, 1]],
            BTreeMap::from([(1, Split::Striped(4)), (2, Split::Zigzag)]),
        );
        assert_eq!(p.to_custom(), "[R, S(0, striped(1, 4))]");
        assert_eq!(p.splits.len(), 1);
    }
}
