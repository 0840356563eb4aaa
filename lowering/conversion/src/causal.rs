//! Causal attention on tiles whose positions are not one contiguous range (zigzag and striped
//! placements): the (query run, key run) blocks of a tile are classified *full* (every key
//! visible), *diagonal* (causal with the runs' real offsets) or *empty* (skipped), and covered
//! by as few patches as possible, each a plain or a shifted-causal attention on a box of the
//! tile. A zigzag ring step is one patch: the first step a causal patch over both chunks
//! (within a rank the order is increasing, so the local mask is the plain causal one), every
//! other step one full patch (both query chunks against the first key chunk, or the second
//! query chunk against both key chunks).
//!
//! A tile whose mask has a window or documents (`mercury_plan::mask`) is cut into one block per
//! (query run, key run) pair at the runs' real positions ([`mask_blocks`]): the band (causal
//! and window) decides which blocks are empty for every batch, the documents decide the rest
//! at run time.

use crate::order::Seg;
use mercury_plan::mask::Band;

/// Largest number of (query run, key run) blocks of one tile.
pub(crate) const MAX_BLOCKS: usize = 1 << 22;

/// One patch of a tile: query rows `q.0 .. q.0 + q.1` and keys `k.0 .. k.0 + k.1` of the tile,
/// masked or not; masked, it applies the tile's mask with its first query at position
/// `q_offset` and its first key at `k_offset` (for a causal tile: key `k_offset + c` is visible
/// to query `q_offset + r` iff not larger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    pub q: (usize, usize),
    pub k: (usize, usize),
    pub masked: bool,
    pub q_offset: usize,
    pub k_offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Full,
    Empty,
    /// The diagonal: visible iff `c - r <= t` for row r, column c of the block.
    Diagonal(i64),
}

fn classify(q: &Seg, k: &Seg) -> Class {
    let t = q.pos as i64 - k.pos as i64;
    if t >= k.len as i64 - 1 {
        Class::Full
    } else if t <= -(q.len as i64) {
        Class::Empty
    } else {
        Class::Diagonal(t)
    }
}

/// The blocks covering a causal tile with query segments `q` and key segments `k` (each in
/// tile order, covering the tile). `Err` when the key runs are not in increasing order and the
/// tile has more than [`MAX_BLOCKS`] blocks.
pub(crate) fn causal_blocks(q: &[Seg], k: &[Seg]) -> Result<Vec<Block>, String> {
    let monotone = k.windows(2).all(|w| w[0].pos + w[0].len <= w[1].pos);
    if !monotone && q.len().saturating_mul(k.len()) > MAX_BLOCKS {
        return Err(format!(
            "a causal attention tile has {} x {} runs of positions; tile along the placement's runs",
            q.len(),
            k.len()
        ));
    }
    // With increasing key runs, each query run sees a prefix of full blocks, then diagonal
    // ones, then empty ones: two boundaries per row instead of a class per block.
    let bounds: Vec<(usize, usize)> = if monotone {
        q.iter()
            .map(|qs| {
                let f = k.partition_point(|ks| ks.pos + ks.len <= qs.pos + 1);
                let e = k.partition_point(|ks| ks.pos < qs.pos + qs.len);
                (f, e.max(f))
            })
            .collect()
    } else {
        vec![]
    };
    let cx = Cover { q, k, bounds };
    let rows: Vec<(usize, (usize, usize))> = (0..q.len())
        .filter_map(|i| cx.nonempty(i).map(|r| (i, r)))
        .collect();
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(vec![]);
    };
    let (i_lo, i_hi) = (first.0, last.0);
    let j_lo = rows.iter().map(|r| r.1 .0).min().unwrap_or(0);
    let j_hi = rows.iter().map(|r| r.1 .1).max().unwrap_or(0);
    if let Some(b) = cx.rect(i_lo, i_hi, j_lo, j_hi) {
        return Ok(vec![b]);
    }
    // Strips of rows, each trimmed to its keys, grown while one patch covers them; a row no
    // patch covers whole is cut along its keys.
    let mut out = Vec::new();
    let mut i = i_lo;
    while i <= i_hi {
        let Some((a, b)) = cx.nonempty(i) else {
            i += 1;
            continue;
        };
        let (mut end, mut lo, mut hi) = (i, a, b);
        let mut best = cx.rect(i, i, a, b);
        while best.is_some() && end < i_hi {
            let (a2, b2) = cx.nonempty(end + 1).unwrap_or((lo, hi));
            match cx.rect(i, end + 1, lo.min(a2), hi.max(b2)) {
                Some(r) => {
                    best = Some(r);
                    end += 1;
                    lo = lo.min(a2);
                    hi = hi.max(b2);
                }
                None => break,
            }
        }
        match best {
            Some(r) => out.push(r),
            None => out.extend(cx.cut_row(i, a, b)),
        }
        i = end + 1;
    }
    Ok(out)
}

/// The blocks of a tile with query runs `q` and key runs `k` under a mask with a window or
/// documents: one per (query run, key run) pair at their real positions, without those the
/// `band` leaves empty when `band_decides` (no documents, or one set of boundaries for queries
/// and keys: a document's anchors coincide, so the band alone empties a block). A block the
/// band leaves full and no documents cut runs unmasked (`documents`: the run decides).
/// `Err` when the tile has more than [`MAX_BLOCKS`] pairs of runs.
pub(crate) fn mask_blocks(
    q: &[Seg],
    k: &[Seg],
    band: Band,
    band_decides: bool,
    documents: bool,
) -> Result<Vec<Block>, String> {
    if q.len().saturating_mul(k.len()) > MAX_BLOCKS {
        return Err(format!(
            "a masked attention tile has {} x {} runs of positions; tile along the placement's runs",
            q.len(),
            k.len()
        ));
    }
    let mut out = Vec::new();
    for qs in q {
        for ks in k {
            let (qr, kr) = (qs.pos..qs.pos + qs.len, ks.pos..ks.pos + ks.len);
            let pairs = band.pairs(qr, kr, 0);
            if band_decides && pairs == 0 {
                continue;
            }
            out.push(Block {
                q: (qs.at, qs.len),
                k: (ks.at, ks.len),
                masked: documents || pairs != (qs.len as u64) * (ks.len as u64),
                q_offset: qs.pos,
                k_offset: ks.pos,
            });
        }
    }
    Ok(out)
}

struct Cover<'a> {
    q: &'a [Seg],
    k: &'a [Seg],
    /// Per query run, with increasing key runs: the first key run not fully visible and the
    /// first one fully masked (empty when the key runs are not increasing).
    bounds: Vec<(usize, usize)>,
}

impl Cover<'_> {
    fn class(&self, i: usize, j: usize) -> Class {
        match self.bounds.get(i) {
            Some(&(f, _)) if j < f => Class::Full,
            Some(&(_, e)) if j >= e => Class::Empty,
            _ => classify(&self.q[i], &self.k[j]),
        }
    }

    /// The first and last key runs query run `i` sees anything of.
    fn nonempty(&self, i: usize) -> Option<(usize, usize)> {
        if let Some(&(_, e)) = self.bounds.get(i) {
            return (e > 0).then(|| (0, e - 1));
        }
        let seen = |j: &usize| self.class(i, *j) != Class::Empty;
        let first = (0..self.k.len()).find(seen)?;
        let last = (0..self.k.len()).rev().find(seen).unwrap_or(first);
        Some((first, last))
    }

    /// One patch over query runs `i0..=i1` and key runs `j0..=j1`, if a plain or a shifted
    /// causal mask over that box equals the real mask on every block of it.
    fn rect(&self, i0: usize, i1: usize, j0: usize, j1: usize) -> Option<Block> {
        let (x0, y0) = (self.q[i0].at, self.k[j0].at);
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        let mut all_full = true;
        let mut any_visible = false;
        for i in i0..=i1 {
            let qs = &self.q[i];
            let x = (qs.at - x0) as i64;
            let h = qs.len as i64;
            // The block's corner in the patch, and the shift d of the patch's mask (visible
            // iff c - r <= d) that reproduces it; full and empty blocks bound d.
            let mut full = |ks: &Seg| {
                let rel = x - (ks.at - y0) as i64;
                lo = lo.max(ks.len as i64 - 1 - rel);
                any_visible = true;
            };
            let (f, e) = match self.bounds.get(i) {
                Some(&(f, e)) => (f.clamp(j0, j1 + 1), e.clamp(j0, j1 + 1)),
                None => (j0, j0),
            };
            if self.bounds.get(i).is_some() {
                // Full blocks: the last one binds; empty blocks: the first one binds.
                if f > j0 {
                    full(&self.k[f - 1]);
                }
                if e <= j1 {
                    let rel = x - (self.k[e].at - y0) as i64;
                    hi = hi.min(-h - rel);
                    all_full = false;
                }
            }
            let diag = if self.bounds.get(i).is_some() {
                f..e
            } else {
                j0..j1 + 1
            };
            for j in diag {
                let ks = &self.k[j];
                let rel = x - (ks.at - y0) as i64;
                match self.class(i, j) {
                    Class::Full => {
                        lo = lo.max(ks.len as i64 - 1 - rel);
                        any_visible = true;
                    }
                    Class::Empty => {
                        hi = hi.min(-h - rel);
                        all_full = false;
                    }
                    Class::Diagonal(t) => {
                        lo = lo.max(t - rel);
                        hi = hi.min(t - rel);
                        all_full = false;
                        any_visible = true;
                    }
                }
            }
            if lo > hi {
                return None;
            }
        }
        if !any_visible {
            return None;
        }
        let q = (x0, self.q[i1].at + self.q[i1].len - x0);
        let k = (y0, self.k[j1].at + self.k[j1].len - y0);
        if all_full {
            return Some(Block {
                q,
                k,
                masked: false,
                q_offset: self.q[i0].pos,
                k_offset: self.k[j0].pos,
            });
        }
        // Within [lo, hi] every choice gives the same mask on the box; the least is kept.
        let d = lo;
        let (q_offset, k_offset) = if i0 == i1 && j0 == j1 {
            (self.q[i0].pos, self.k[j0].pos)
        } else {
            let qo = self.q[i0].pos as i64;
            if qo - d >= 0 {
                (qo as usize, (qo - d) as usize)
            } else {
                (d as usize, 0)
            }
        };
        Some(Block {
            q,
            k,
            masked: true,
            q_offset,
            k_offset,
        })
    }

    /// Query run `i`'s keys `a..=b`, cut into maximal runs of key runs one patch covers.
    fn cut_row(&self, i: usize, a: usize, b: usize) -> Vec<Block> {
        let mut out = Vec::new();
        let mut j = a;
        while j <= b {
            if self.class(i, j) == Class::Empty {
                j += 1;
                continue;
            }
            let mut end = j;
            let mut best = self.rect(i, i, j, j);
            while end < b {
                match self.rect(i, i, j, end + 1) {
                    Some(r) => {
                        best = Some(r);
                        end += 1;
                    }
                    None => break,
                }
            }
            out.extend(best);
            j = end + 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(runs: &[(usize, usize)]) -> Vec<Seg> {
        let mut at = 0;
        runs.iter()
            .map(|&(pos, len)| {
                let s = Seg { at, pos, len };
                at += len;
                s
            })
            .collect()
    }

    /// Visible (row, key) pairs of a cover, as real positions, against the real mask.
    fn check(q: &[Seg], k: &[Seg]) -> usize {
        let blocks = causal_blocks(q, k).unwrap();
        let real = |x: usize, segs: &[Seg]| {
            let s = segs.iter().find(|s| s.at <= x && x < s.at + s.len).unwrap();
            s.pos + x - s.at
        };
        let (nq, nk) = (
            q.iter().map(|s| s.len).sum::<usize>(),
            k.iter().map(|s| s.len).sum::<usize>(),
        );
        let mut seen = vec![vec![0; nk]; nq];
        for b in &blocks {
            for r in 0..b.q.1 {
                for c in 0..b.k.1 {
                    if !b.masked || b.k_offset + c <= b.q_offset + r {
                        seen[b.q.0 + r][b.k.0 + c] += 1;
                    }
                }
            }
        }
        for (x, row) in seen.iter().enumerate() {
            for (y, got) in row.iter().enumerate() {
                let want = usize::from(real(y, k) <= real(x, q));
                assert_eq!(*got, want, "row {x} key {y} with {blocks:?}");
            }
        }
        blocks.len()
    }

    #[test]
    fn zigzag_ring_steps_are_one_patch() {
        // 4 ranks, chunks of 4: rank 1 holds 4..8 and 24..28.
        let mine = segs(&[(4, 4), (24, 4)]);
        assert_eq!(check(&mine, &mine), 1);
        assert!(causal_blocks(&mine, &mine).unwrap()[0].masked);
        for other in [[(0, 4), (28, 4)], [(8, 4), (20, 4)], [(12, 4), (16, 4)]] {
            let b = causal_blocks(&mine, &segs(&other)).unwrap();
            assert_eq!(b.len(), 1);
            assert!(!b[0].masked);
            assert_eq!(b[0].q.1 * b[0].k.1, 32, "{b:?}");
            check(&mine, &segs(&other));
        }
    }

    #[test]
    fn striped_and_scattered_tiles_are_covered_exactly() {
        // Striped, block 2 over 2 ranks: rank 1 holds 2..4, 6..8, 10..12.
        let r1 = segs(&[(2, 2), (6, 2), (10, 2)]);
        let r0 = segs(&[(0, 2), (4, 2), (8, 2)]);
        check(&r1, &r0);
        check(&r0, &r1);
        assert_eq!(check(&r1, &r1), 1);
        // Token striping: one patch per step, however many runs.
        let t1: Vec<(usize, usize)> = (0..300).map(|x| (4 * x + 1, 1)).collect();
        let t0: Vec<(usize, usize)> = (0..300).map(|x| (4 * x, 1)).collect();
        assert_eq!(check(&segs(&t1), &segs(&t0)), 1);
        assert_eq!(check(&segs(&t0), &segs(&t1)), 1);
        // A whole zigzag-ordered buffer against itself.
        let all = segs(&[
            (0, 2),
            (14, 2),
            (2, 2),
            (12, 2),
            (4, 2),
            (10, 2),
            (6, 2),
            (8, 2),
        ]);
        check(&all, &all);
        // Contiguous tiles: below, on and above the diagonal.
        assert_eq!(check(&segs(&[(8, 4)]), &segs(&[(0, 4)])), 1);
        assert_eq!(check(&segs(&[(8, 4)]), &segs(&[(6, 4)])), 1);
        assert!(causal_blocks(&segs(&[(0, 4)]), &segs(&[(8, 4)]))
            .unwrap()
            .is_empty());
    }
}
