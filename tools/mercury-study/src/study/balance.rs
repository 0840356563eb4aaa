//! The document balancer on long-tail batches (`mercury-study balance`): busiest rank's
//! attention work over the mean with the documents packed as drawn and as
//! [`mercury_plan::balance::balance_documents`] reorders them, per total length and shard
//! layout, and the balancer's host time. Exact counts (query rows' visible keys), no model.

use mercury_plan::balance::{balance_documents, Layout, RowMask};
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;

/// The total lengths of the table (docs/perf.md's packed-documents rows).
pub const BALANCE_TOKENS: [usize; 3] = [32768, 131072, 524288];

/// Long-tail document lengths filling `total` tokens (the last cut to fit): Pareto from
/// `min_len` with shape `alpha` (numpy's `min_len * (1 + pareto(alpha))`, median
/// `min_len * 2^(1/alpha)`), at most `max_len`; as `scripts/bench/packed_vs_flex.py` draws
/// them after MagiAttention's benchmarks (another generator: other lengths, the same law).
pub fn long_tail(
    total: usize,
    seed: u64,
    alpha: f64,
    min_len: usize,
    max_len: usize,
) -> Vec<usize> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut left = total;
    while left > 0 {
        let u: f64 = rng.gen();
        let lomax = (1.0 - u).powf(-1.0 / alpha) - 1.0;
        let n = ((min_len as f64) * (1.0 + lomax)).min(max_len as f64) as usize;
        let n = n.clamp(1, left);
        out.push(n);
        left -= n;
    }
    out
}

/// The table: for each total in `tokens`, `seeds` batches (seeds 0..), causal documents on
/// `ranks` ranks, contiguous, zigzag and chunked zigzag shards.
pub fn balance_study(tokens: &[usize], ranks: usize, seeds: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Document balancer: busiest rank / mean attention work, causal long-tail documents on {ranks} ranks\n\n\
         Lengths: Pareto from 64 tokens, alpha 0.25, at most 8192 (seeds 0-{}). Before: packed as drawn; after: \
         the balancer's order. Host time: the balancer on one core.\n\n\
         | tokens | layout | documents | before (min-max) | after (min-max) | after, worst seed | balancer ms (max) |\n\
         | --- | --- | --- | --- | --- | --- | --- |",
        seeds.saturating_sub(1)
    );
    let mask = RowMask {
        causal: true,
        ..Default::default()
    };
    for &total in tokens {
        for (name, layout) in layouts(total, ranks) {
            let Ok(layout) = layout else {
                let _ = writeln!(
                    out,
                    "| {} | {name} | - | does not split | | | |",
                    tokens_text(total)
                );
                continue;
            };
            let (mut docs, mut before, mut after, mut ms) =
                (Vec::new(), Vec::new(), Vec::new(), 0f64);
            for seed in 0..seeds {
                let lengths = long_tail(total, seed + total as u64, 0.25, 64, 8192);
                let t = std::time::Instant::now();
                let b =
                    balance_documents(&lengths, &layout, mask).expect("lengths fill the layout");
                ms = ms.max(t.elapsed().as_secs_f64() * 1e3);
                docs.push(lengths.len());
                before.push(b.before);
                after.push(b.after);
            }
            let range = |v: &[f64]| {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                (lo, hi)
            };
            let (b0, b1) = range(&before);
            let (a0, a1) = range(&after);
            let _ = writeln!(
                out,
                "| {} | {name} | {}-{} | {b0:.3}-{b1:.3}x | {a0:.3}-{a1:.3}x | {a1:.3}x | {ms:.1} |",
                tokens_text(total),
                docs.iter().min().unwrap_or(&0),
                docs.iter().max().unwrap_or(&0),
            );
        }
    }
    out
}

/// The shard layouts of the table: contiguous, zigzag (one round), and zigzag over chunks in
/// [`ROUNDS`] rounds.
fn layouts(total: usize, ranks: usize) -> Vec<(String, Result<Layout, String>)> {
    let mut out = vec![
        ("contiguous".to_string(), Layout::new(total, ranks, false)),
        ("zigzag".to_string(), Layout::new(total, ranks, true)),
    ];
    for rounds in ROUNDS {
        let chunk = total / (2 * ranks * rounds).max(1);
        out.push((
            format!("zigzag, {rounds} rounds (chunks of {chunk})"),
            Layout::zigzag_chunks(total, ranks, chunk),
        ));
    }
    out
}

/// The rounds of the chunked zigzag rows.
pub const ROUNDS: [usize; 2] = [4, 8];

fn tokens_text(n: usize) -> String {
    if n.is_multiple_of(1024) {
        format!("{}K", n / 1024)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_tail_fills_the_total_within_the_bounds() {
        for seed in 0..20 {
            let l = long_tail(32768, seed, 0.25, 64, 8192);
            assert_eq!(l.iter().sum::<usize>(), 32768);
            assert!(l.iter().all(|&n| (1..=8192).contains(&n)));
            assert!(l[..l.len() - 1].iter().all(|&n| n >= 64), "{l:?}");
        }
    }

    #[test]
    fn the_table_has_a_row_per_total_and_layout() {
        let t = balance_study(&[16384, 1000], 8, 2);
        assert!(
            t.contains("| 16K | contiguous |")
                && t.contains("| 16K | zigzag |")
                && t.contains("| 16K | zigzag, 8 rounds (chunks of 128) |"),
            "{t}"
        );
        assert!(t.contains("| 1000 | zigzag | - | does not split |"), "{t}");
    }
}
