//! Masked attention blocks on cuDNN's variable-sequence path (`mercury_kernels::cuda::cudnn::
//! ragged`): a block's visible pairs cut into document pieces, each one batch entry.
//!
//! # The decomposition
//!
//! Under documents (causal or not, no window) the rows of a block fall into runs of two kinds
//! ([`pieces`]), read off the rows' key bounds ([`super::row_bounds`], the one reading of
//! `mercury_plan::mask` the NVRTC path uses too):
//!
//! * **full**: consecutive rows that see the same keys `[lo, hi)` (a document's keys that
//!   come entirely before its queries in the block: every ring and zigzag block whose key range
//!   precedes its query range);
//! * **causal**: consecutive rows `r0 + i` that see keys `[lo, lo + i + 1)` (a document piece
//!   whose queries and keys start together: a block whose query range is its key range).
//!
//! Rows that see no key belong to no piece (o = 0, lse = -inf, as the NVRTC kernel leaves
//! them). Each piece is one cuDNN batch entry (its query rows and keys through ragged offsets
//! into the block's Q / K / V and the scratch O / Stats), the causal ones in one call with
//! cuDNN's top-left causal mask, the full ones in another. A block whose rows fall into tiny
//! pieces (a window, thousands of one-token documents: fewer than [`MIN_MEAN_ROWS`] rows a
//! piece) stays on the NVRTC kernel, which handles any row bounds.
//!
//! # Plans
//!
//! A plan bakes in the number of entries and the longest piece; both are rounded up to powers
//! of two ([`bucket`]; unused entries get length 0), so a few plans serve every batch.

use super::PartSlot;
use crate::cuda::error::Result;
use crate::cuda::mem::CopyCx;
use mercury_kernels::cuda::cudnn::{IoType, RaggedCall, RaggedKey};
use mercury_kernels::cuda::{AttnLaunch, CudnnAttention};

/// A block's rows that see keys in one of the two shapes cuDNN's entries take (module docs).
/// Rows and keys are indices into the block (`0..sq`, `0..sk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub row: usize,
    pub rows: usize,
    pub key: usize,
    pub keys: usize,
    /// Row `row + i` sees keys `key ..= key + i` (then `keys == rows`); else all `keys`.
    pub causal: bool,
}

/// Fewest query rows per piece, on average, for the cuDNN path to take a block.
pub const MIN_MEAN_ROWS: usize = 16;

/// The block's rows as pieces, from their visible keys (`bounds[r]`: global key positions
/// `[lo, hi)`, `[0, 0)` for none) cut to the block's keys `k0 .. k0 + sk`. Every row that sees
/// a key is in exactly one piece (a row alone is a full piece of one row), so the pieces tile
/// the block's visible pairs exactly; runs are kept as long as their shape allows.
pub fn pieces(bounds: &[[i32; 2]], k0: usize, sk: usize) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let (k0, k1) = (k0 as i64, (k0 + sk) as i64);
    for (r, b) in bounds.iter().enumerate() {
        let (lo, hi) = ((b[0] as i64).max(k0), (b[1] as i64).min(k1));
        if lo >= hi {
            continue;
        }
        let (key, keys) = ((lo - k0) as usize, (hi - lo) as usize);
        if let Some(p) = out
            .last_mut()
            .filter(|p| p.row + p.rows == r && p.key == key)
        {
            let extend = if p.rows == 1 {
                // The second row decides the shape.
                p.causal = p.keys == 1 && keys == 2;
                p.causal || keys == p.keys
            } else if p.causal {
                keys == p.rows + 1
            } else {
                keys == p.keys
            };
            if extend {
                p.rows += 1;
                p.keys = keys.max(p.keys);
                continue;
            }
            if p.rows == 1 {
                p.causal = false;
            }
        }
        out.push(Piece {
            row: r,
            rows: 1,
            key,
            keys,
            causal: false,
        });
    }
    out
}

/// `x` rounded up to a power of two, at least `min`.
pub fn bucket(x: usize, min: usize) -> usize {
    x.max(min).next_power_of_two()
}

/// The per-entry arrays of one call as uploaded, INT32 each: `seq_q[E]`, `seq_kv[E]`, then
/// the ragged offsets (elements) of Q, K, V, O and Stats, `E + 1` each (unused entries: length
/// 0 at the last offset). [`RaggedSet::arrays`] gives their device addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaggedSet {
    pub key: RaggedKey,
    pub host: Vec<i32>,
}

impl RaggedSet {
    /// INT32 elements of the arrays of `entries` entries.
    pub fn len(entries: usize) -> usize {
        2 * entries + 5 * (entries + 1)
    }

    /// Device addresses of `seq_q`, `seq_kv` and the five offsets when the arrays start at
    /// `base`.
    pub fn arrays(&self, base: u64) -> (u64, u64, [u64; 5]) {
        Self::arrays_of(self.key.entries as u64, base)
    }

    /// [`RaggedSet::arrays`] for `e` entries.
    pub fn arrays_of(e: u64, base: u64) -> (u64, u64, [u64; 5]) {
        let at = |i: u64| base + 4 * i;
        let off = |t: u64| at(2 * e + t * (e + 1));
        (at(0), at(e), [off(0), off(1), off(2), off(3), off(4)])
    }
}

/// The calls (at most two: full pieces, causal pieces) that compute `pieces` of launch `l`,
/// with O and Stats going to a dense scratch `[b, hq, sq, dv]` bf16 and `[b, hq, sq]` f32.
/// Every batch of the launch repeats the pieces. Errors: an offset or length past INT32.
pub fn ragged_sets(l: &AttnLaunch, pieces: &[Piece]) -> Result<Vec<RaggedSet>, String> {
    let d = l.dims;
    let i32_of = |x: i64, what: &str| {
        i32::try_from(x).map_err(|_| format!("{what} {x} does not fit cuDNN's INT32 offsets"))
    };
    let (sq, dv) = (d.sq as i64, l.dv as i64);
    // Every element cuDNN addresses from a bound pointer stays within INT32 elements (its
    // offsets are INT32; the strides are not assumed to be computed wider).
    let extent = |t: &mercury_kernels::cuda::Strided3, heads: usize, rows: usize, w: usize| {
        (d.b as i64 - 1) * t.sb + (heads as i64 - 1) * t.sh + (rows as i64 - 1) * t.sr + w as i64
    };
    for (n, x) in [
        ("q", extent(&l.q, d.hq, d.sq, d.d)),
        ("k", extent(&l.k, d.hk, d.sk, d.d)),
        ("v", extent(&l.v, d.hk, d.sk, l.dv)),
        ("o", d.b as i64 * d.hq as i64 * sq * dv),
    ] {
        i32_of(x, &format!("{n} extent (elements)"))?;
    }
    let mut out = Vec::new();
    for causal in [false, true] {
        let ps: Vec<&Piece> = pieces.iter().filter(|p| p.causal == causal).collect();
        if ps.is_empty() {
            continue;
        }
        let n = ps.len() * d.b;
        let entries = bucket(n, 1);
        let max_sq = ps.iter().map(|p| p.rows).max().unwrap_or(1);
        let max_sk = ps.iter().map(|p| p.keys).max().unwrap_or(1);
        let key = RaggedKey {
            io: IoType::Bf16,
            entries: entries as i64,
            hq: d.hq as i64,
            hk: d.hk as i64,
            max_sq: bucket(max_sq, 64) as i64,
            max_sk: bucket(max_sk, 64) as i64,
            dqk: d.d as i64,
            dv,
            q: [l.q.sh, l.q.sr],
            k: [l.k.sh, l.k.sr],
            v: [l.v.sh, l.v.sr],
            o: [sq * dv, dv],
            stats_h: sq,
            causal,
            stats_ragged: true,
        };
        let mut seq_q = Vec::with_capacity(entries);
        let mut seq_kv = Vec::with_capacity(entries);
        let mut offs: [Vec<i32>; 5] = Default::default();
        for bi in 0..d.b as i64 {
            for p in &ps {
                let (r, c) = (p.row as i64, p.key as i64);
                seq_q.push(i32_of(p.rows as i64, "piece rows")?);
                seq_kv.push(i32_of(p.keys as i64, "piece keys")?);
                let o_b = bi * d.hq as i64 * sq;
                for (t, x) in [
                    bi * l.q.sb + r * l.q.sr,
                    bi * l.k.sb + c * l.k.sr,
                    bi * l.v.sb + c * l.v.sr,
                    (o_b + r) * dv,
                    o_b + r,
                ]
                .into_iter()
                .enumerate()
                {
                    offs[t].push(i32_of(x, "offset")?);
                }
            }
        }
        // The end offsets (one past the last entry's start is not read for lengths 0; cuDNN
        // reads `b + 1` entries) and the unused entries.
        for o in &mut offs {
            let last = *o.last().unwrap_or(&0);
            o.resize(entries + 1, last);
        }
        seq_q.resize(entries, 0);
        seq_kv.resize(entries, 0);
        let mut host = Vec::with_capacity(RaggedSet::len(entries));
        host.extend(seq_q);
        host.extend(seq_kv);
        for o in offs {
            host.extend(o);
        }
        out.push(RaggedSet { key, host });
    }
    Ok(out)
}

/// Whether a block with these pieces goes to cuDNN: a mean of at least [`MIN_MEAN_ROWS`]
/// rows a piece, and at least one piece.
pub fn worth_it(pieces: &[Piece]) -> bool {
    let rows: usize = pieces.iter().map(|p| p.rows).sum();
    !pieces.is_empty() && rows >= MIN_MEAN_ROWS * pieces.len()
}

/// Enqueues a masked block's cuDNN calls (`calls`: plan key, address of its arrays, uploaded
/// for this run) into dense scratch O / Stats, the Stats first filled with -inf (rows no piece
/// covers see no key), then merges the scratch into (or, without `accumulate`, writes it to)
/// the launch's `o` / `lse` (rows with lse -inf: o = 0, their O never read).
///
/// # Safety
/// The launch's tensors must be live device memory of the stream's context, and each call's
/// arrays hold its entries' lengths and offsets ([`RaggedSet`]) for this launch.
pub(super) unsafe fn enqueue_ragged(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    l: &AttnLaunch,
    calls: &[(RaggedKey, u64)],
) -> Result<()> {
    let acc = super::cudnn::launch_acc(l)?;
    let rows = acc.b * acc.hq * acc.sq;
    let o_part = cx.scratch.take(rows * acc.d * 2)?;
    let lse_part = cx.scratch.take(rows * 4)?;
    // SAFETY: the part holds `rows` rows of this stream's scratch; q/k/v and the arrays per
    // the caller.
    unsafe { ragged_into(cx, cudnn, l, calls, (o_part, lse_part), rows)? };
    // SAFETY: the scratch part is written (or -inf) for every row; the accumulator per the
    // caller.
    unsafe {
        cx.dk
            .attn_merge(cx.stream, &acc, o_part, lse_part, !l.accumulate)
    }
}

/// As [`enqueue_ragged`] for a block whose merge is deferred: its calls write its part of the
/// group's buffer (`ps`; no calls: the part's lse is -inf, it adds nothing), and the group's
/// last block merges every part into the accumulator in one pass.
///
/// # Safety
/// As [`enqueue_ragged`]; every block of the group before this one wrote its part on this
/// stream, and the part buffer holds the group's parts.
pub(super) unsafe fn enqueue_ragged_part(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    l: &AttnLaunch,
    calls: &[(RaggedKey, u64)],
    ps: &PartSlot,
) -> Result<()> {
    let acc = super::cudnn::launch_acc(l)?;
    let rows = acc.b * acc.hq * acc.sq;
    // SAFETY: the part holds `rows` rows (allocated for the group's accumulator).
    unsafe { ragged_into(cx, cudnn, l, calls, ps.addrs(), rows)? };
    if let Some((n, overwrite)) = ps.merge {
        // SAFETY: every part of the group was written by its blocks on this stream.
        unsafe {
            cx.dk.attn_merge_parts(
                cx.stream,
                &acc,
                (ps.o_base, ps.l_base),
                (n, ps.o_stride, ps.l_stride),
                overwrite,
            )?
        };
    }
    Ok(())
}

/// The calls of one block into a dense part `(o, lse)` of `rows` rows: lse filled with -inf
/// first (rows no piece covers), then each call.
///
/// # Safety
/// `o` / `lse` hold `rows` rows of `l.dv` bf16 / one f32 of device memory of the stream's
/// context; q/k/v and the calls' arrays per [`enqueue_ragged`].
unsafe fn ragged_into(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    l: &AttnLaunch,
    calls: &[(RaggedKey, u64)],
    (o_part, lse_part): (u64, u64),
    rows: usize,
) -> Result<()> {
    // SAFETY: `lse_part` holds `rows` f32, per the caller.
    unsafe {
        cx.dk
            .fill_f32(cx.stream, lse_part, f32::NEG_INFINITY, rows)?
    };
    for (key, base) in calls {
        let ws_bytes = cudnn.prepare_ragged(key)?.max(256);
        let ws = cx.scratch.take(ws_bytes)?;
        let (seq_q, seq_kv, offsets) = RaggedSet::arrays_of(key.entries as u64, *base);
        let call = RaggedCall {
            key: *key,
            q: l.q.ptr,
            k: l.k.ptr,
            v: l.v.ptr,
            o: o_part,
            stats: lse_part,
            seq_q,
            seq_kv,
            offsets,
            scale: l.params.scale as f32,
        };
        // SAFETY: q/k/v per the caller, O and Stats dense `[b, hq, sq, (dv)]` scratch sized
        // above (every entry's rows inside the block's), the arrays per the caller.
        unsafe { cudnn.forward_ragged(cx.stream, &call, ws, ws_bytes)? };
    }
    Ok(())
}

#[cfg(test)]
#[path = "ragged_tests.rs"]
mod tests;
