//! The document balancer: an order of a batch's packed documents that spreads the attention
//! work evenly over the ranks holding the sequence's shards.
//!
//! Attention inside documents does not depend on where each document sits in the packed
//! sequence (a document keeps its tokens contiguous and in order, so its mask and its RoPE
//! positions are unchanged), but the work a rank does does: under sequence sharding a rank
//! computes its own query rows against every key they see, and a query row at offset `u` of a
//! causal document sees `u + 1` keys. Packing a long document's tail onto one rank and short
//! documents onto another makes one rank the busiest, and every rank waits for it. The
//! balancer picks an order of the documents that keeps the busiest rank's work close to the
//! mean, for one batch of boundaries (one compiled plan serves every order), in the role of
//! MagiAttention's dispatch solver (Zhang et al., "MagiAttention", 2025) and of PyTorch
//! context parallel's per-document load balancer, restricted to moving whole documents: the
//! shard layout (contiguous, or ring-flash-attn's zigzag) stays what the plan was compiled for.
//!
//! Work is counted as the query-key pairs each rank's query rows see (a row's visible keys
//! in its document, cut by a window), in closed form per piece of a document, so an order
//! costs `O(documents + pieces)` to evaluate; the search is simulated annealing over swaps and
//! moves from up to four starting orders (as given, longest first, two seeded shuffles; it stops
//! at the first that is good enough), deterministic in its inputs: every rank that runs it on
//! the same boundaries gets the same order.
//!
//! Moving whole documents cannot split a document longer than a shard piece, so a batch of a
//! few documents each several pieces long keeps some imbalance (per-document zigzag would need
//! positions that are not contiguous in the packed sequence, which the plans' masks do not take).

use rand::{Rng, SeedableRng};
use std::ops::Range;

/// Which rank holds each position of the packed sequence: `positions` split into equal pieces,
/// contiguous (`ranks` pieces, rank `r` piece `r`) or zigzag (`2 * ranks` pieces, rank `r`
/// pieces `r` and `2 * ranks - 1 - r`, ring-flash-attn's layout and `mercury.shard_sequence`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Position ranges in sequence order, each with its rank.
    pub pieces: Vec<(Range<usize>, usize)>,
    /// Number of ranks.
    pub ranks: usize,
}

impl Layout {
    /// `positions` in `ranks` (`zigzag`: `2 * ranks`) equal pieces; an error when they do not
    /// divide evenly or `ranks` is 0.
    pub fn new(positions: usize, ranks: usize, zigzag: bool) -> Result<Layout, String> {
        if ranks == 0 {
            return Err("a layout needs at least one rank".into());
        }
        let n = if zigzag { 2 * ranks } else { ranks };
        if !positions.is_multiple_of(n) {
            return Err(format!(
                "{positions} positions do not split into {n} equal {} over {ranks} ranks",
                if zigzag { "zigzag chunks" } else { "shards" }
            ));
        }
        let c = positions / n;
        if zigzag {
            // One round of chunks.
            return Layout::zigzag_chunks(positions, ranks, c.max(1));
        }
        let pieces = (0..n).map(|p| (p * c..(p + 1) * c, p)).collect();
        Ok(Layout { pieces, ranks })
    }

    /// `positions` in rounds of `2 * ranks` chunks of `chunk` positions, rank `r` holding
    /// chunks `r` and `2 * ranks - 1 - r` of every round (CommIR's `zigzag(l, chunk)`,
    /// `mercury.shard_sequence`'s `chunk_size`; one round is [`Layout::new`]'s zigzag). An
    /// error when the rounds do not divide `positions` or `ranks` or `chunk` is 0.
    pub fn zigzag_chunks(positions: usize, ranks: usize, chunk: usize) -> Result<Layout, String> {
        if ranks == 0 || chunk == 0 {
            return Err(
                "a layout needs at least one rank and chunks of at least one position".into(),
            );
        }
        let n = 2 * ranks;
        if !positions.is_multiple_of(n * chunk) {
            return Err(format!(
                "{positions} positions do not split into rounds of {n} zigzag chunks of {chunk} over {ranks} ranks"
            ));
        }
        let pieces = (0..positions / chunk)
            .map(|p| {
                let i = p % n;
                let r = if i < ranks { i } else { n - 1 - i };
                (p * chunk..(p + 1) * chunk, r)
            })
            .collect();
        Ok(Layout { pieces, ranks })
    }

    /// A layout from position ranges with their ranks: in order, from position 0, each
    /// starting where the last ended, every rank below `ranks`.
    pub fn from_pieces(pieces: Vec<(Range<usize>, usize)>, ranks: usize) -> Result<Layout, String> {
        let mut at = 0;
        for (r, rank) in &pieces {
            if r.start != at || r.end < r.start || *rank >= ranks {
                return Err(format!(
                    "layout pieces must follow each other from position 0 on ranks below {ranks}: got {r:?} on rank {rank} at position {at}"
                ));
            }
            at = r.end;
        }
        Ok(Layout { pieces, ranks })
    }

    /// The number of positions the layout covers.
    pub fn positions(&self) -> usize {
        self.pieces.last().map_or(0, |(r, _)| r.end)
    }
}

/// The keys a query row sees inside its document: a causal mask and a window, as flash-attn's
/// `causal` and `window_size` (`left`/`right`: keys `i - left ..= i + right`, `None` unbounded;
/// with `causal` the right side is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowMask {
    pub causal: bool,
    pub left: Option<usize>,
    pub right: Option<usize>,
}

impl RowMask {
    /// Query-key pairs of the first `t` rows of a document of `len` tokens (each row `u` sees
    /// keys `max(0, u - left) ..= min(len - 1, u + right)`), in closed form.
    pub fn prefix_pairs(&self, len: usize, t: usize) -> u64 {
        let t = t.min(len) as u64;
        let len = len as u64;
        let right = if self.causal {
            Some(0)
        } else {
            self.right.map(|r| r as u64)
        };
        // Sum over u < t of (min(len - 1, u + right) + 1).
        let upper = match right {
            None => t * len,
            Some(h) => {
                let a = t.min(len.saturating_sub(h));
                a * (a.saturating_sub(1)) / 2 + a * (h + 1) + (t - a) * len
            }
        };
        // Sum over u < t of max(0, u - left).
        let lower = match self.left {
            None => 0,
            Some(l) => {
                let m = t.saturating_sub(l as u64);
                m * m.saturating_sub(1) / 2
            }
        };
        upper - lower
    }
}

/// Work per rank (query-key pairs) of the documents of `lengths` packed in `order` from
/// position 0 (positions after the last document are padding, no work).
pub fn rank_work(lengths: &[usize], order: &[usize], layout: &Layout, mask: RowMask) -> Vec<u64> {
    let mut work = vec![0u64; layout.ranks];
    let mut piece = 0;
    let mut start = 0;
    for &d in order {
        let len = lengths[d];
        let end = start + len;
        let mut p = start;
        while p < end && piece < layout.pieces.len() {
            let (range, rank) = &layout.pieces[piece];
            if p >= range.end {
                piece += 1;
                continue;
            }
            let q = end.min(range.end);
            work[*rank] += mask.prefix_pairs(len, q - start) - mask.prefix_pairs(len, p - start);
            p = q;
        }
        start = end;
    }
    work
}

/// Busiest rank's work over the mean (1 when there is no work).
pub fn busiest_over_mean(work: &[u64]) -> f64 {
    let total: u64 = work.iter().sum();
    if total == 0 {
        return 1.0;
    }
    let max = work.iter().copied().max().unwrap_or(0);
    max as f64 * work.len() as f64 / total as f64
}

/// A balanced order and what it gained.
#[derive(Debug, Clone, PartialEq)]
pub struct Balanced {
    /// Document indices in their new packing order (a permutation of `0..lengths.len()`).
    pub order: Vec<usize>,
    /// Busiest rank's work over the mean in the order given.
    pub before: f64,
    /// The same in `order`.
    pub after: f64,
}

/// An order of the documents of `lengths` (tokens each, packed from position 0) whose busiest
/// rank under `layout` does as little more than the mean as the search finds (see the module
/// docs). Never worse than the order given. An error when the documents hold more tokens than
/// the layout's positions.
pub fn balance_documents(
    lengths: &[usize],
    layout: &Layout,
    mask: RowMask,
) -> Result<Balanced, String> {
    if layout.positions() >= 1 << 31 {
        return Err(format!(
            "{} positions: the balancer takes fewer than 2^31 (int32 cu_seqlens)",
            layout.positions()
        ));
    }
    let tokens: usize = lengths.iter().sum();
    if tokens > layout.positions() {
        return Err(format!(
            "the documents hold {tokens} tokens but the sequence has {} positions",
            layout.positions()
        ));
    }
    let identity: Vec<usize> = (0..lengths.len()).collect();
    let cost = |o: &[usize]| score(&rank_work(lengths, o, layout, mask));
    let given = rank_work(lengths, &identity, layout, mask);
    let before = busiest_over_mean(&given);
    let mut best = (score(&given), identity.clone());
    let n = lengths.len();
    if n >= 2 && layout.ranks >= 2 && best.0 > GOOD_ENOUGH {
        let mut longest = identity.clone();
        longest.sort_by_key(|&d| std::cmp::Reverse(lengths[d]));
        // About 200 tries per document within [2000, 40000], at most about 2e7 steps of the
        // evaluation per start (each costs documents + pieces): tens of milliseconds.
        let per_try = n + layout.pieces.len();
        let tries = (200 * n)
            .clamp(2000, 40000)
            .min((20_000_000 / per_try).max(300));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x006d_6572_6375_7279);
        // Two shuffled starts after the given and longest-first orders: a run that settles in a
        // poor local optimum (about 3% of long-tail batches of ~100 documents) is retried.
        let mut shuffled = || {
            let mut o = identity.clone();
            for i in (1..o.len()).rev() {
                o.swap(i, rng.gen_range(0..=i));
            }
            o
        };
        let starts = [identity.clone(), longest, shuffled(), shuffled()];
        for start in starts {
            let found = anneal(start, tries, &mut rng, &cost);
            if found.0 < best.0 {
                best = found;
            }
            if best.0 <= GOOD_ENOUGH {
                break;
            }
        }
    }
    let after = busiest_over_mean(&rank_work(lengths, &best.1, layout, mask));
    Ok(Balanced {
        order: best.1,
        before,
        after,
    })
}

/// A score at which the search stops: the busiest rank within 0.2% of the mean (the spread
/// term of [`score`] adds at most 0.1% more).
const GOOD_ENOUGH: f64 = 1.002;

/// The search's objective: busiest over mean, with a small share of the spread (root mean
/// square over the mean) so that among orders of one busiest rank the more even one wins.
fn score(work: &[u64]) -> f64 {
    let n = work.len() as f64;
    let mean = work.iter().map(|&w| w as f64).sum::<f64>() / n;
    if mean == 0.0 {
        return 1.0;
    }
    let rms = (work.iter().map(|&w| (w as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
    busiest_over_mean(work) + 1e-3 * rms / mean
}

/// Simulated annealing over orders from `order`: a swap of two documents or a move of one,
/// accepted when no worse or with the Metropolis probability at a temperature falling
/// geometrically from 0.05; returns the best order seen and its score.
fn anneal(
    mut order: Vec<usize>,
    tries: usize,
    rng: &mut rand_chacha::ChaCha8Rng,
    cost: &dyn Fn(&[usize]) -> f64,
) -> (f64, Vec<usize>) {
    let n = order.len();
    let mut now = cost(&order);
    let mut best = (now, order.clone());
    let mut temperature = 0.05f64;
    let cooling = (1e-4f64 / 0.05).powf(1.0 / tries as f64);
    let mut next = order.clone();
    for _ in 0..tries {
        next.clone_from(&order);
        let i = rng.gen_range(0..n);
        let j = rng.gen_range(0..n);
        if rng.gen_bool(0.5) {
            next.swap(i, j);
        } else {
            let d = next.remove(i);
            next.insert(j, d);
        }
        let c = cost(&next);
        if c <= now || rng.gen::<f64>() < (-(c - now) / temperature).exp() {
            std::mem::swap(&mut order, &mut next);
            now = c;
            if now < best.0 {
                best = (now, order.clone());
                if now <= GOOD_ENOUGH {
                    break;
                }
            }
        }
        temperature *= cooling;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs of the first `t` rows counted one by one.
    fn brute(mask: RowMask, len: usize, t: usize) -> u64 {
        (0..t.min(len))
            .map(|u| {
                let lo = mask.left.map_or(0, |l| u.saturating_sub(l));
                let right = if mask.causal { Some(0) } else { mask.right };
                let hi = right.map_or(len - 1, |r| (u + r).min(len - 1));
                (hi + 1 - lo) as u64
            })
            .sum()
    }

    #[test]
    fn prefix_pairs_match_counting() {
        for causal in [false, true] {
            for left in [None, Some(0), Some(1), Some(3), Some(50)] {
                for right in [None, Some(0), Some(2), Some(50)] {
                    let m = RowMask {
                        causal,
                        left,
                        right,
                    };
                    for len in [0, 1, 2, 5, 17] {
                        for t in 0..=len + 1 {
                            assert_eq!(m.prefix_pairs(len, t), brute(m, len, t), "{m:?} {len} {t}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn layouts() {
        let z = Layout::new(16, 2, true).unwrap();
        let ranks: Vec<usize> = z.pieces.iter().map(|p| p.1).collect();
        assert_eq!(ranks, [0, 1, 1, 0]);
        assert_eq!(z.pieces[2].0, 8..12);
        assert!(Layout::new(10, 4, false).is_err());
        // One round of chunks is the zigzag; two rounds repeat it.
        assert_eq!(Layout::zigzag_chunks(16, 2, 4).unwrap(), z);
        let two = Layout::zigzag_chunks(16, 2, 2).unwrap();
        let ranks: Vec<usize> = two.pieces.iter().map(|p| p.1).collect();
        assert_eq!(ranks, vec![0, 1, 1, 0, 0, 1, 1, 0]);
        assert!(Layout::zigzag_chunks(16, 2, 3).is_err());
        assert!(Layout::zigzag_chunks(16, 2, 0).is_err());
        assert!(Layout::new(8, 0, false).is_err());
    }

    #[test]
    fn work_per_rank_counts_every_pair_once() {
        let layout = Layout::new(32, 4, true).unwrap();
        let mask = RowMask {
            causal: true,
            ..Default::default()
        };
        let lengths = [7, 1, 13, 0, 9];
        let order = [2, 0, 4, 1, 3];
        let w = rank_work(&lengths, &order, &layout, mask);
        let total: u64 = lengths.iter().map(|&l| (l * (l + 1) / 2) as u64).sum();
        assert_eq!(w.iter().sum::<u64>(), total);
        // Rank 0 holds positions 0..4 and 28..32: rows 0-3 of document 2 (1+2+3+4), row 8 of
        // document 4 (9), document 1 (1) and padding.
        assert_eq!(w[0], 20);
    }

    #[test]
    fn the_balancer_returns_a_permutation_no_worse_and_deterministic() {
        let mask = RowMask {
            causal: true,
            ..Default::default()
        };
        // A long tail: a few long documents (shorter than a shard) first, then short ones.
        let mut lengths = vec![60, 50, 40];
        lengths.extend((0..60).map(|i| 10 + (i * 7) % 30));
        let total: usize = lengths.iter().sum();
        let positions = total.div_ceil(16) * 16;
        for zigzag in [false, true] {
            let layout = Layout::new(positions, 8, zigzag).unwrap();
            let b = balance_documents(&lengths, &layout, mask).unwrap();
            let mut seen = b.order.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..lengths.len()).collect::<Vec<_>>());
            assert!(b.after <= b.before, "{b:?}");
            assert!(b.before > 1.2 && b.after < 1.05, "{zigzag}: {b:?}");
            assert_eq!(balance_documents(&lengths, &layout, mask).unwrap(), b);
        }
    }

    #[test]
    fn too_many_tokens_are_refused() {
        let layout = Layout::new(8, 2, false).unwrap();
        let e = balance_documents(&[5, 4], &layout, RowMask::default()).unwrap_err();
        assert!(e.contains("9 tokens"), "{e}");
    }
}
