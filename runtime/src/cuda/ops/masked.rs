//! Masked attention on the GPU: sliding windows, packed documents (run-time boundaries),
//! `lower_right`, composed with causal (`mercury_plan::mask`, the one definition).
//!
//! # How a masked block is computed
//!
//! Under any of these masks the keys a query row sees are one run of positions
//! ([`MaskCx::keys`]). Per block the executor keeps the run of each of its query rows as two
//! INT32 device arrays (`lo`, `hi`: global key positions, `hi` exclusive), filled from the
//! boundaries of the run ([`row_bounds`]; when the plan is built for a mask without documents).
//! The block's rows are cut into chunks of [`MaskedSplit::chunk`] rows; each chunk whose rows
//! see some key of the block becomes one cuDNN call ([`Piece`]) over the chunk's rows and the
//! run of keys its rows see together (widened to a size bucket, [`key_bucket`], so that a few
//! execution plans serve every batch). The call masks with the rows' bounds
//! ([`mercury_kernels::cuda::cudnn::Mask::RowBounds`]: `lo[i] <= kbase + j < hi[i]`, the
//! composite graph's index compare, no per-batch plan); its rows that see no key of the call
//! (cuDNN leaves NaN there) get lse = -inf from the mask helper kernel, and the merge kernels
//! fold the call into the block's output (`o = 0`, `lse = -inf` for rows no call covers).
//!
//! # Trade-off
//!
//! One cuDNN call per chunk, not per document: many short documents cost no more calls than
//! one long one, and a chunk's calls skip every key tile before the first key its rows see and
//! after the last (a long document's causal chunks, a window's far keys, the documents of other
//! chunks). Inside a chunk the fused kernel still computes tiles that the per-row bounds mask
//! entirely (a chunk that spans several short documents computes the rectangle that covers
//! them): work grows with the chunk size, calls shrink. cuDNN's own variable-length route
//! (ragged offsets, one batch entry per document) needs a plan per number and length of
//! documents; its band masks need cuDNN 9.21. Blocks with nothing visible for a batch launch
//! no call at all.

use super::resolve::unsupported;
use crate::cuda::device_kernels::AttnAcc;
use crate::cuda::error::Result;
use crate::cuda::mem::CopyCx;
use mercury_kernels::cuda::cudnn::{IoType, RowBounds};
use mercury_kernels::cuda::{AttnLaunch, CudnnAttention, MaskKernels, SdpaCall, Strided3, Tensor4};
use mercury_plan::mask::{Boundaries, MaskCx};
use mercury_plan::AttnMask;

/// Default query rows per cuDNN call of a masked block (a multiple of 128, cuDNN's row tile).
pub const DEFAULT_MASK_CHUNK: usize = 1024;

/// One cuDNN call of a masked block: query rows `r0 .. r0 + rows` and keys `k0 .. k0 + keys`
/// of the block (tile-relative); `empty`: some of its rows see no key of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub r0: usize,
    pub rows: usize,
    pub k0: usize,
    pub keys: usize,
    pub empty: bool,
}

/// A masked attention block as the executor computes it (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedSplit {
    pub causal: bool,
    pub mask: AttnMask,
    /// Query rows per call (a multiple of 4, so that every call's bounds are 16-byte aligned).
    pub chunk: usize,
    /// The block's row bounds on its device: `lo` then `hi`, `sq` INT32 each (0 until the
    /// executor allocates them).
    pub bounds: u64,
    /// The calls of this run; `None` until the run's boundaries are known
    /// ([`MaskedSplit::needs_documents`]).
    pub pieces: Option<Vec<Piece>>,
    /// The launch's output and lse.
    pub acc: AttnAcc,
}

impl MaskedSplit {
    /// Checks what the masked path needs of `l` (unit lse row stride, f32-finite scale, the
    /// merge kernels' output geometry, positions within INT32).
    pub fn new(l: &AttnLaunch, causal: bool, mask: AttnMask, chunk: usize) -> Result<Self> {
        let d = l.dims;
        if !(l.params.scale as f32).is_finite() {
            return Err(unsupported(format!(
                "scale {} not finite in f32",
                l.params.scale
            )));
        }
        if l.lse.sr != 1 {
            return Err(unsupported(format!(
                "lse row stride {} (the merge kernels take unit row strides)",
                l.lse.sr
            )));
        }
        let end = (l.params.q_offset + d.sq).max(l.params.k_offset + d.sk);
        if end > i32::MAX as usize {
            return Err(unsupported(format!(
                "masked attention over {end} positions: cuDNN's mask compares INT32 positions"
            )));
        }
        let acc = super::cudnn::launch_acc(l)?;
        Ok(MaskedSplit {
            causal,
            mask,
            chunk: (chunk.max(4) / 4) * 4,
            bounds: 0,
            pieces: None,
            acc,
        })
    }

    /// Whether the calls depend on the run's document boundaries.
    pub fn needs_documents(&self) -> bool {
        self.mask.documents.is_some()
    }

    /// Bytes from `lo` to `hi` in the bounds (16-byte aligned, as is every call's first row).
    fn hi_offset(&self) -> usize {
        (self.acc.sq * 4).div_ceil(16) * 16
    }

    /// Bytes of the block's bounds on its device.
    pub fn bounds_bytes(&self) -> usize {
        2 * self.hi_offset()
    }

    /// Device addresses of the first row's `lo` and `hi`.
    fn lo_hi(&self) -> (u64, u64) {
        (self.bounds, self.bounds + self.hi_offset() as u64)
    }

    /// The block's row bounds (`lo` then `hi`, [`MaskedSplit::bounds_bytes`] as uploaded) and
    /// its calls for a run with
    /// boundaries `docs` (the plan's `documents` inputs, in order).
    pub fn for_run(
        &self,
        l: &AttnLaunch,
        docs: &[Boundaries],
    ) -> std::result::Result<(Vec<i32>, Vec<Piece>), String> {
        let m = MaskCx::new(self.causal, &self.mask, docs)?;
        let b = row_bounds(&m, l.params.q_offset, l.dims.sq);
        let pieces = pieces(&b, l.params.k_offset, l.dims.sk, self.chunk);
        let half = self.hi_offset() / 4;
        let mut flat = vec![0; 2 * half];
        for (r, x) in b.iter().enumerate() {
            flat[r] = x[0];
            flat[half + r] = x[1];
        }
        Ok((flat, pieces))
    }

    /// The cuDNN call of `p` (O and Stats at address 0 until the enqueue points them at
    /// scratch).
    pub fn call(&self, l: &AttnLaunch, p: &Piece) -> SdpaCall {
        let d = l.dims;
        let st = |t: &Strided3| [t.sb, t.sh, t.sr, 1];
        let at = |t: &Strided3, row: usize| Tensor4 {
            ptr: t.ptr + (row as i64 * t.sr * 2) as u64,
            strides: st(t),
        };
        let (lo, hi) = self.lo_hi();
        SdpaCall {
            io: IoType::Bf16,
            o_f32: false,
            b: d.b,
            hq: d.hq,
            hk: d.hk,
            sq: p.rows,
            sk: p.keys,
            dqk: d.d,
            dv: l.dv,
            q: at(&l.q, p.r0),
            k: at(&l.k, p.k0),
            v: at(&l.v, p.k0),
            o: Tensor4::dense(0, [d.b, d.hq, p.rows, l.dv]),
            stats: Tensor4::dense(0, [d.b, d.hq, p.rows, 1]),
            scale: l.params.scale as f32,
            causal_delta: None,
            rows: Some(RowBounds {
                lo: lo + (p.r0 * 4) as u64,
                hi: hi + (p.r0 * 4) as u64,
                kbase: (l.params.k_offset + p.k0) as i32,
            }),
        }
    }

    /// A representative call (the first chunk against every key, at stand-in 256-byte
    /// aligned addresses) for checking, when the executor is built, that the loaded cuDNN
    /// builds a plan for the row-bounds graph.
    pub fn probe(&self, l: &AttnLaunch) -> SdpaCall {
        let p = Piece {
            r0: 0,
            rows: self.chunk.min(l.dims.sq),
            k0: 0,
            keys: l.dims.sk,
            empty: true,
        };
        let mut s = self.clone();
        if s.bounds == 0 {
            s.bounds = 256;
        }
        let mut c = s.call(l, &p);
        c.o.ptr = 256;
        c.stats.ptr = 256;
        c
    }
}

/// The visible keys of query rows `q_offset .. q_offset + sq` (global positions) as
/// `[lo, hi)` pairs in INT32 (`[0, 0)` for a row that sees nothing; an unbounded end is
/// clamped to `i32::MAX`).
pub fn row_bounds(m: &MaskCx, q_offset: usize, sq: usize) -> Vec<[i32; 2]> {
    (q_offset..q_offset + sq)
        .map(|i| {
            let k = m.keys(i);
            if k.is_empty() {
                [0, 0]
            } else {
                let c = |x: usize| x.min(i32::MAX as usize) as i32;
                [c(k.start), c(k.end)]
            }
        })
        .collect()
}

/// The key count a call of `n` visible keys computes, out of a block of `sk`: `n` rounded up
/// to the next of 128, 192, 256, 384, 512, 768, ... (each at most 1.5 times the previous), at
/// most `sk`: about two execution plans per doubling of the key count.
pub fn key_bucket(n: usize, sk: usize) -> usize {
    let mut b = 128;
    loop {
        if b >= n {
            return b.min(sk);
        }
        if b / 2 * 3 >= n {
            return (b / 2 * 3).min(sk);
        }
        b *= 2;
    }
}

/// The calls of a block whose rows see the keys `bounds` (global positions, one pair per row,
/// [`row_bounds`]), its keys starting at global position `k_offset`, `sk` of them: per chunk of
/// `chunk` rows that sees some key of the block, one call over those rows and the keys they
/// see together (widened to [`key_bucket`], kept inside the block). Calls cover disjoint rows.
pub fn pieces(bounds: &[[i32; 2]], k_offset: usize, sk: usize, chunk: usize) -> Vec<Piece> {
    let (kb, ke) = (k_offset as i64, (k_offset + sk) as i64);
    let mut out = Vec::new();
    for (ci, rows) in bounds.chunks(chunk.max(1)).enumerate() {
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        let mut empty = false;
        for r in rows {
            let (a, b) = ((r[0] as i64).max(kb), (r[1] as i64).min(ke));
            if a < b {
                lo = lo.min(a);
                hi = hi.max(b);
            } else {
                empty = true;
            }
        }
        if lo >= hi {
            continue;
        }
        let keys = key_bucket((hi - lo) as usize, sk);
        let k0 = ((lo - kb) as usize).min(sk - keys);
        out.push(Piece {
            r0: ci * chunk,
            rows: rows.len(),
            k0,
            keys,
            empty,
        });
    }
    out
}

/// Enqueues a masked block (see the module docs): without `accumulate`, rows no call covers
/// get o = 0, lse = -inf.
///
/// # Safety
/// The launch's tensors and the split's bounds must be live device memory of the stream's
/// context, the bounds uploaded for this run.
pub(super) unsafe fn enqueue_masked(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    masks: &MaskKernels,
    l: &AttnLaunch,
    s: &MaskedSplit,
) -> Result<()> {
    let pieces = s.pieces.as_ref().ok_or_else(|| {
        unsupported(
            "masked attention: the document boundaries of this run were not given \
             (CudaExecutor::set_documents)"
                .into(),
        )
    })?;
    let acc = &s.acc;
    let covered: usize = pieces.iter().map(|p| p.rows).sum();
    let overwrite = !l.accumulate && covered == acc.sq;
    if !l.accumulate && !overwrite {
        let n = acc.b * acc.hq * acc.sq;
        let ninf = cx.scratch.take(n * 4)?;
        // SAFETY: `ninf` holds n f32 of scratch; with lse_part = -inf the merge writes o = 0
        // and lse = -inf without reading o_part.
        unsafe {
            cx.dk.fill_f32(cx.stream, ninf, f32::NEG_INFINITY, n)?;
            cx.dk.attn_merge(cx.stream, acc, ninf, ninf, true)?;
        }
    }
    let Some(most) = pieces.iter().map(|p| p.rows).max() else {
        return Ok(());
    };
    let mut ws_bytes = 256;
    for p in pieces {
        ws_bytes = ws_bytes.max(cudnn.prepare(&s.call(l, p))?);
    }
    let o_part = cx.scratch.take(acc.b * acc.hq * most * acc.d * 2)?;
    let lse_part = cx.scratch.take(acc.b * acc.hq * most * 4)?;
    let ws = cx.scratch.take(ws_bytes)?;
    for p in pieces {
        let mut c = s.call(l, p);
        c.o = Tensor4::dense(o_part, [acc.b, acc.hq, p.rows, acc.d]);
        c.stats = Tensor4::dense(lse_part, [acc.b, acc.hq, p.rows, 1]);
        let rows = acc.skip_rows(p.r0).first_rows(p.rows);
        // SAFETY: q/k/v and the bounds per the caller; O and Stats dense in this stream's
        // scratch, sized for the largest call; the calls run in stream order, each merged
        // before the next overwrites the scratch.
        unsafe {
            cudnn.forward_ws(cx.stream, &c, ws, ws_bytes)?;
            if p.empty {
                let r = c.rows.expect("a masked call has row bounds");
                let kbase = r.kbase as i64;
                masks.empty_rows(
                    cx.stream,
                    lse_part,
                    (acc.b * acc.hq, p.rows),
                    (r.lo, r.hi),
                    (kbase, kbase + p.keys as i64),
                )?;
            }
            cx.dk
                .attn_merge(cx.stream, &rows, o_part, lse_part, overwrite)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Random boundaries over `n` positions: 1-token documents, long ones, a padding tail.
    fn random_docs(rng: &mut impl Rng, n: usize, docs: usize) -> Boundaries {
        let end = if rng.gen_bool(0.3) {
            rng.gen_range(n / 2..=n)
        } else {
            n
        };
        let mut cuts: Vec<usize> = (1..docs).map(|_| rng.gen_range(0..=end)).collect();
        cuts.sort_unstable();
        let mut b = vec![0];
        b.extend(cuts);
        b.push(end);
        Boundaries::new(b, n).unwrap()
    }

    /// The calls of a block, pair by pair against `mercury_plan::mask`: a pair is computed
    /// (inside a call, between its row's bounds) exactly when the mask makes it visible; calls
    /// cover disjoint rows, stay in the block, start every chunk's rows on a chunk boundary,
    /// and say when some row sees no key of the call. Fresh random documents every run.
    #[test]
    fn pieces_cover_exactly_the_visible_pairs() {
        let seed: u64 = rand::random();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for case in 0..300 {
            let n = rng.gen_range(1..400);
            let docs = match rng.gen_range(0..3) {
                0 => rng.gen_range(1..4),
                1 => rng.gen_range(1..=n),
                _ => n,
            };
            let bq = random_docs(&mut rng, n, docs);
            let bk = if rng.gen_bool(0.3) {
                random_docs(&mut rng, n, docs)
            } else {
                bq.clone()
            };
            let all = [bq, bk];
            let pick =
                |r: &mut rand_chacha::ChaCha8Rng| r.gen_bool(0.5).then(|| r.gen_range(0..n + 2));
            let mask = AttnMask {
                left: pick(&mut rng),
                right: pick(&mut rng),
                documents: match rng.gen_range(0..3) {
                    0 => None,
                    1 => Some([0, 0]),
                    _ => Some([0, 1]),
                },
                lower_right: false,
            };
            let mask = AttnMask {
                lower_right: mask.documents.is_some() && rng.gen_bool(0.3),
                ..mask
            };
            let causal = rng.gen_bool(0.5);
            let m = MaskCx::new(causal, &mask, &all).unwrap();
            let q0 = rng.gen_range(0..n);
            let sq = rng.gen_range(1..=n - q0);
            let k0 = rng.gen_range(0..n);
            let sk = rng.gen_range(1..=n - k0);
            let chunk = [4, 8, 64, 128, 1024][rng.gen_range(0..5)];
            let b = row_bounds(&m, q0, sq);
            let ps = pieces(&b, k0, sk, chunk);
            let ctx = format!("seed {seed} case {case}: {mask:?} causal {causal} q {q0}+{sq} k {k0}+{sk} chunk {chunk}");
            let mut owner = vec![None; sq];
            for (pi, p) in ps.iter().enumerate() {
                assert!(p.r0.is_multiple_of(chunk) && p.rows >= 1, "{ctx}: {p:?}");
                assert!(p.k0 + p.keys <= sk && p.keys >= 1, "{ctx}: {p:?}");
                let mut some_empty = false;
                for r in p.r0..p.r0 + p.rows {
                    assert!(owner[r].is_none(), "{ctx}: row {r} in two calls");
                    owner[r] = Some(pi);
                    let [lo, hi] = b[r].map(|x| x as i64);
                    let (kb, ke) = ((k0 + p.k0) as i64, (k0 + p.k0 + p.keys) as i64);
                    some_empty |= lo.max(kb) >= hi.min(ke);
                }
                assert_eq!(p.empty, some_empty, "{ctx}: {p:?}");
            }
            for r in 0..sq {
                for j in 0..sk {
                    let want = m.visible(q0 + r, k0 + j);
                    let got = owner[r].is_some_and(|pi| {
                        let p = &ps[pi];
                        let [lo, hi] = b[r].map(|x| x as usize);
                        (p.k0..p.k0 + p.keys).contains(&j) && (lo..hi).contains(&(k0 + j))
                    });
                    assert_eq!(got, want, "{ctx}: row {r} key {j}");
                }
            }
        }
    }

    #[test]
    fn key_buckets_grow_by_at_most_one_and_a_half() {
        assert_eq!(key_bucket(1, 1000), 128);
        assert_eq!(key_bucket(129, 1000), 192);
        assert_eq!(key_bucket(193, 1000), 256);
        assert_eq!(key_bucket(300, 1000), 384);
        assert_eq!(key_bucket(900, 1000), 1000);
        assert_eq!(key_bucket(50, 60), 60);
        for n in 1..5000 {
            let b = key_bucket(n, usize::MAX);
            assert!(b >= n && (b <= 128 || 2 * b <= 3 * n + 256), "{n} -> {b}");
        }
    }
}
