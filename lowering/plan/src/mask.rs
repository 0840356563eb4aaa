//! Attention masks beyond `causal`: sliding windows and packed documents, and the one reading
//! of them every layer shares (the f64 CPU executor, the block states of a batch, the work
//! counts of the reports, the balancer and the cost model).
//!
//! Positions are a token's index in its buffer's sequence dimension (the attention tiles'
//! second dimension from the end), as for `causal`. A mask combines:
//!
//! - **documents** (packed sequences, flash-attn's `cu_seqlens`): run-time prefix sums
//!   `c[0] = 0 <= c[1] <= ... <= c[n]` over the query positions and over the key positions
//!   (the plan's [`Documents`] inputs, given with every run, so one plan serves every batch).
//!   Query `i` belongs to document `d` when `cq[d] <= i < cq[d + 1]` and sees only keys
//!   `ck[d] <= j < ck[d + 1]`; positions from `c[n]` on belong to no document and see
//!   nothing (padding: o = 0, lse = -inf). Without documents the whole sequence is one.
//! - a **band** on the offset `t = (j - ak) - (i - aq)` of a key from its query, both measured
//!   from their document's anchor (`aq`, `ak`): its start (upper left, torch's
//!   `causal_upper_left` and the default) or, with `lower_right`, its end (flash-attn's
//!   alignment, `causal_lower_right`); the anchors differ only where a document has more
//!   keys than queries or fewer. `causal` is `t <= 0`; a window `(left, right)` is
//!   `-left <= t <= right` (flash-attn's `window_size`, `None` for unbounded).
//!
//! For each query row the visible keys are one run of positions (its document's keys cut by
//! the band), so a kernel loops over a range per row ([`MaskCx::keys`]).

use serde::{Deserialize, Serialize};
use std::ops::Range;

/// The mask of an attention patch beyond its `causal` flag (see the module docs): a sliding
/// window and run-time document boundaries. `AttnMask::default()` adds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AttnMask {
    /// Keys at most `left` positions before the query are visible (`None`: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<usize>,
    /// Keys at most `right` positions after the query are visible (`None`: all of them;
    /// `causal` makes it 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<usize>,
    /// The query's and the key's document boundaries: indices into
    /// [`crate::Plan::documents`] (the same twice for self-attention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<[usize; 2]>,
    /// Measure offsets from each document's end instead of its start (needs documents).
    #[serde(default, skip_serializing_if = "is_false")]
    pub lower_right: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl AttnMask {
    /// Whether the mask adds nothing to `causal`.
    pub fn is_none(&self) -> bool {
        *self == AttnMask::default()
    }
    /// The band of offsets `t` a key may have from its query under this mask and `causal`.
    pub fn band(&self, causal: bool) -> Band {
        let right = self.right.map(|r| r as i64);
        Band {
            lo: self.left.map(|l| -(l as i64)),
            hi: if causal {
                Some(right.map_or(0, |r| r.min(0)))
            } else {
                right
            },
        }
    }
    /// Whether a block's state can be decided when the plan is built: without documents, or
    /// with one set of boundaries for queries and keys (self-attention: the anchors of a
    /// document are at the same position, so the band alone says what is empty).
    pub fn is_static(&self) -> bool {
        match self.documents {
            None => true,
            Some([q, k]) => q == k,
        }
    }
}

/// Offsets `lo <= t <= hi` a key may have from its query (`None`: unbounded on that side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Band {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

impl Band {
    /// Whether offset `t` is inside the band.
    pub fn contains(&self, t: i64) -> bool {
        self.lo.is_none_or(|lo| t >= lo) && self.hi.is_none_or(|hi| t <= hi)
    }
    /// Whether the band leaves some key visible at all (`lo <= hi`).
    pub fn is_empty(&self) -> bool {
        matches!((self.lo, self.hi), (Some(lo), Some(hi)) if lo > hi)
    }
    /// The number of pairs `(i, j)`, `i` in `q`, `j` in `k`, whose offset `j - i - shift` is
    /// in the band: the visible pairs of a block of one document whose key anchor is `shift`
    /// positions after its query anchor. Exact (integer arithmetic in i128).
    pub fn pairs(&self, q: Range<usize>, k: Range<usize>, shift: i64) -> u64 {
        if q.is_empty() || k.is_empty() || self.is_empty() {
            return 0;
        }
        // Pairs with j - i - shift <= h, i in q, j in k: for row i, clamp(i + shift + h + 1
        // - k.start, 0, |k|); summed with the closed form of sum clamp(x, 0, n).
        let n = (k.end - k.start) as i128;
        let g = |x: i128| -> i128 {
            // sum over x' in [0, x) of clamp(x', 0, n)
            if x <= 0 {
                0
            } else if x <= n + 1 {
                x * (x - 1) / 2
            } else {
                n * (n + 1) / 2 + (x - n - 1) * n
            }
        };
        let at_most = |h: Option<i64>| -> i128 {
            let rows = (q.end - q.start) as i128;
            match h {
                None => rows * n,
                Some(h) => {
                    let lo = q.start as i128 + shift as i128 + h as i128 + 1 - k.start as i128;
                    g(lo + rows) - g(lo)
                }
            }
        };
        let below = match self.lo {
            None => 0,
            Some(lo) => at_most(Some(lo - 1)),
        };
        (at_most(self.hi) - below).max(0) as u64
    }
}

/// A block's state for one batch: every pair visible, some, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    Full,
    Partial,
    Empty,
}

/// A run-time document boundaries input of a plan: prefix sums over the positions of one
/// sequence dimension (flash-attn's `cu_seqlens`), bound by `name` with every run as an input
/// of any length `n + 1 >= 1` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Documents {
    /// The input's name (the CommIR `commir.documents` symbol).
    pub name: String,
    /// The positions the boundaries index: the sequence extent of the buffers they apply to.
    pub positions: usize,
}

/// Validated document boundaries: `b[0] = 0`, non-decreasing, `b[n] <= positions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundaries(Vec<usize>);

impl Boundaries {
    /// Checks prefix sums for a sequence of `positions` tokens. `Err` names the first wrong
    /// entry: an empty list, a first entry other than 0, a decrease, a value past `positions`.
    pub fn new(b: Vec<usize>, positions: usize) -> Result<Boundaries, String> {
        match b.first() {
            None => return Err("document boundaries are empty; give at least [0]".into()),
            Some(0) => {}
            Some(x) => return Err(format!("document boundaries start at {x}, not 0")),
        }
        if let Some(i) = (1..b.len()).find(|&i| b[i] < b[i - 1]) {
            return Err(format!(
                "document boundaries decrease at entry {i} ({} after {})",
                b[i],
                b[i - 1]
            ));
        }
        if let Some(last) = b.last().filter(|l| **l > positions) {
            return Err(format!(
                "document boundaries end at {last}, past the {positions} positions of the sequence"
            ));
        }
        Ok(Boundaries(b))
    }
    /// Boundaries from numbers (an executor's inputs): each must be a whole number.
    pub fn from_f64(v: &[f64], positions: usize) -> Result<Boundaries, String> {
        let mut b = Vec::with_capacity(v.len());
        for (i, x) in v.iter().enumerate() {
            if !(x.is_finite() && *x >= 0.0 && x.fract() == 0.0 && *x <= usize::MAX as f64) {
                return Err(format!(
                    "document boundary {i} is {x}, not a non-negative whole number"
                ));
            }
            b.push(*x as usize);
        }
        Boundaries::new(b, positions)
    }
    /// The one document of a sequence of `positions` tokens.
    pub fn whole(positions: usize) -> Boundaries {
        Boundaries(vec![0, positions])
    }
    /// The prefix sums.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }
    /// The number of documents.
    pub fn len(&self) -> usize {
        self.0.len() - 1
    }
    /// Whether there is no document (every position is padding).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The document holding position `p`, if any.
    pub fn doc(&self, p: usize) -> Option<usize> {
        let d = self.0.partition_point(|x| *x <= p);
        (d >= 1 && d < self.0.len()).then(|| d - 1)
    }
    /// Positions of document `d`.
    pub fn range(&self, d: usize) -> Range<usize> {
        self.0[d]..self.0[d + 1]
    }
}

/// A mask with its run-time boundaries: what decides visibility for one run of a plan.
#[derive(Debug, Clone, Copy)]
pub struct MaskCx<'a> {
    pub band: Band,
    /// Query and key boundaries (`None`: the whole sequence is one document).
    pub docs: Option<(&'a Boundaries, &'a Boundaries)>,
    pub lower_right: bool,
}

impl<'a> MaskCx<'a> {
    /// The mask of a patch: `causal` and `mask` with the boundaries of this run (`docs`, the
    /// plan's [`Documents`] inputs in order). `Err` when an index is out of range, or when the
    /// query and key boundaries hold different numbers of documents.
    pub fn new(
        causal: bool,
        mask: &AttnMask,
        docs: &'a [Boundaries],
    ) -> Result<MaskCx<'a>, String> {
        let docs = match mask.documents {
            None => None,
            Some([q, k]) => {
                let get = |i: usize| {
                    docs.get(i).ok_or_else(|| {
                        format!(
                            "the mask names document boundaries {i}, and the run has {}",
                            docs.len()
                        )
                    })
                };
                let (bq, bk) = (get(q)?, get(k)?);
                if bq.len() != bk.len() {
                    return Err(format!(
                        "the query boundaries hold {} documents and the key boundaries {}; they must pair up",
                        bq.len(),
                        bk.len()
                    ));
                }
                Some((bq, bk))
            }
        };
        Ok(MaskCx {
            band: mask.band(causal),
            docs,
            lower_right: mask.lower_right,
        })
    }

    /// The anchors' shift `ak - aq` of document `d`.
    fn shift(&self, d: usize) -> i64 {
        match self.docs {
            None => 0,
            Some((q, k)) => {
                let (rq, rk) = (q.range(d), k.range(d));
                if self.lower_right {
                    rk.end as i64 - rq.end as i64
                } else {
                    rk.start as i64 - rq.start as i64
                }
            }
        }
    }

    /// The keys query position `i` sees, as a range of key positions (empty when none).
    pub fn keys(&self, i: usize) -> Range<usize> {
        if self.band.is_empty() {
            return 0..0;
        }
        let (range, shift) = match self.docs {
            None => (0..usize::MAX, 0),
            Some((q, k)) => match q.doc(i) {
                None => return 0..0,
                Some(d) => (k.range(d), self.shift(d)),
            },
        };
        // j - i - shift in [lo, hi]
        let base = i as i128 + shift as i128;
        let lo = self.band.lo.map_or(range.start as i128, |l| {
            (base + l as i128).max(range.start as i128)
        });
        let hi = self.band.hi.map_or(range.end as i128, |h| {
            (base + h as i128 + 1).min(range.end as i128)
        });
        if hi <= lo {
            return 0..0;
        }
        lo as usize..hi as usize
    }

    /// Whether key position `j` is visible to query position `i`.
    pub fn visible(&self, i: usize, j: usize) -> bool {
        self.keys(i).contains(&j)
    }

    /// The documents intersecting query positions `q`, with their query and key ranges cut to
    /// the block (`k`) and their shift; one pseudo-document without boundaries.
    fn parts(&self, q: &Range<usize>, k: &Range<usize>) -> Vec<(Range<usize>, Range<usize>, i64)> {
        let cut = |a: &Range<usize>, b: Range<usize>| a.start.max(b.start)..a.end.min(b.end);
        match self.docs {
            None => vec![(q.clone(), k.clone(), 0)],
            Some((bq, bk)) => {
                if q.is_empty() {
                    return vec![];
                }
                let first = bq.0.partition_point(|x| *x <= q.start).saturating_sub(1);
                let mut out = Vec::new();
                for d in first..bq.len() {
                    let rq = bq.range(d);
                    if rq.start >= q.end {
                        break;
                    }
                    let (cq, ck) = (cut(q, rq), cut(k, bk.range(d)));
                    if !cq.is_empty() && !ck.is_empty() {
                        out.push((cq, ck, self.shift(d)));
                    }
                }
                out
            }
        }
    }

    /// The visible pairs of the block of query positions `q` and key positions `k`.
    pub fn pairs(&self, q: Range<usize>, k: Range<usize>) -> u64 {
        self.parts(&q, &k)
            .into_iter()
            .map(|(q, k, s)| self.band.pairs(q, k, s))
            .sum()
    }

    /// The block's state for this run: every pair visible, some, or none.
    pub fn state(&self, q: Range<usize>, k: Range<usize>) -> BlockState {
        let all = (q.len() as u64).saturating_mul(k.len() as u64);
        match self.pairs(q, k) {
            0 => BlockState::Empty,
            n if n == all => BlockState::Full,
            _ => BlockState::Partial,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Visible pairs by enumeration.
    fn brute(m: &MaskCx, q: Range<usize>, k: Range<usize>) -> u64 {
        let mut n = 0;
        for i in q {
            for j in k.clone() {
                if m.visible(i, j) {
                    n += 1;
                }
            }
        }
        n
    }

    /// The definition, pair by pair, independent of `keys`.
    fn defn(m: &MaskCx, i: usize, j: usize) -> bool {
        let (d, s) = match m.docs {
            None => (0, 0),
            Some((q, k)) => match q.doc(i) {
                None => return false,
                Some(d) => {
                    if !k.range(d).contains(&j) {
                        return false;
                    }
                    (d, m.shift(d))
                }
            },
        };
        let _ = d;
        m.band.contains(j as i64 - i as i64 - s)
    }

    #[test]
    fn band_pairs_match_enumeration() {
        for (lo, hi) in [
            (None, None),
            (None, Some(0)),
            (Some(-3), Some(0)),
            (Some(-2), Some(5)),
            (Some(1), Some(4)),
            (Some(4), Some(1)),
        ] {
            let band = Band { lo, hi };
            for shift in [-7i64, -1, 0, 2, 9] {
                for (q, k) in [(0..5, 0..5), (3..9, 0..4), (0..4, 6..13), (10..11, 2..20)] {
                    let mut n = 0;
                    for i in q.clone() {
                        for j in k.clone() {
                            n += u64::from(band.contains(j as i64 - i as i64 - shift));
                        }
                    }
                    assert_eq!(
                        band.pairs(q.clone(), k.clone(), shift),
                        n,
                        "{band:?} {shift} {q:?} {k:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn documents_windows_and_alignment() {
        let bq = Boundaries::new(vec![0, 1, 5, 5, 12, 14], 16).unwrap();
        let bk = Boundaries::new(vec![0, 3, 4, 6, 10, 16], 16).unwrap();
        for causal in [false, true] {
            for (left, right) in [
                (None, None),
                (Some(2), None),
                (Some(1), Some(3)),
                (None, Some(0)),
            ] {
                for lower_right in [false, true] {
                    let mask = AttnMask {
                        left,
                        right,
                        documents: Some([0, 1]),
                        lower_right,
                    };
                    let all = [bq.clone(), bk.clone()];
                    let m = MaskCx::new(causal, &mask, &all).unwrap();
                    for i in 0..16 {
                        for j in 0..16 {
                            assert_eq!(m.visible(i, j), defn(&m, i, j), "{mask:?} {i} {j}");
                        }
                    }
                    for (q, k) in [(0..16, 0..16), (2..7, 3..11), (12..16, 0..16), (4..5, 5..6)] {
                        assert_eq!(m.pairs(q.clone(), k.clone()), brute(&m, q, k));
                    }
                }
            }
        }
        // Positions past the last boundary see nothing; a 1-token document sees itself.
        let one = [Boundaries::new(vec![0, 1, 4], 6).unwrap()];
        let m = MaskCx::new(
            true,
            &AttnMask {
                documents: Some([0, 0]),
                ..AttnMask::default()
            },
            &one,
        )
        .unwrap();
        assert_eq!(m.keys(0), 0..1);
        assert_eq!(m.keys(3), 1..4);
        assert_eq!(m.keys(4), 0..0);
        assert_eq!(m.state(0..1, 1..4), BlockState::Empty);
        assert_eq!(m.state(2..4, 1..2), BlockState::Full);
        assert_eq!(m.state(1..4, 1..4), BlockState::Partial);
    }

    #[test]
    fn boundaries_are_checked() {
        assert!(Boundaries::new(vec![], 4).unwrap_err().contains("empty"));
        assert!(Boundaries::new(vec![1, 4], 4)
            .unwrap_err()
            .contains("start at 1"));
        assert!(Boundaries::new(vec![0, 3, 2], 4)
            .unwrap_err()
            .contains("decrease at entry 2"));
        assert!(Boundaries::new(vec![0, 5], 4)
            .unwrap_err()
            .contains("past the 4 positions"));
        assert!(Boundaries::from_f64(&[0.0, 1.5], 4)
            .unwrap_err()
            .contains("whole number"));
        let b = Boundaries::from_f64(&[0.0, 2.0, 2.0, 4.0], 4).unwrap();
        assert_eq!(
            (b.len(), b.doc(1), b.doc(2), b.doc(4)),
            (3, Some(0), Some(2), None)
        );
        let two = [Boundaries::whole(4), b];
        let m = AttnMask {
            documents: Some([0, 1]),
            ..AttnMask::default()
        };
        assert!(MaskCx::new(false, &m, &two)
            .unwrap_err()
            .contains("pair up"));
    }
}
