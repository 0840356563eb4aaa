//! Masked attention on the GPU: sliding windows, packed documents (run-time boundaries),
//! `lower_right`, composed with causal (`mercury_plan::mask`, the one definition).
//!
//! # How a masked block is computed
//!
//! Under any of these masks the keys a query row sees are one run of positions
//! ([`MaskCx::keys`]). The executor keeps the run of every query row of a block as two INT32
//! device arrays (`lo`, `hi`: global key positions, `hi` exclusive, [`row_bounds`]), filled
//! when the plan is built for a mask without documents and from each batch's boundaries
//! otherwise (`CudaExecutor::set_documents`). The block is one launch of the NVRTC attention
//! kernel under those row bounds (`AttnLaunch::bounds`): each CTA of 128 query rows streams
//! only the key tiles between the first key and the last its rows see, masks each row to its
//! own run, gives o = 0, lse = -inf to rows that see nothing, and merges into the accumulator
//! in its epilogue. A block a batch leaves empty launches nothing when it accumulates.
//!
//! # cuDNN's variable-sequence path
//!
//! Under documents without a window, `set_documents` also cuts the block's rows into document
//! pieces (`ragged.rs`) and, where they are large enough and cuDNN builds a plan for them, the
//! block runs as one or two calls of cuDNN's variable-sequence forward (one batch entry per
//! piece) plus a merge instead ([`MaskedSplit::ragged`]); the row bounds stay uploaded, so any
//! batch can fall back to the NVRTC kernel.
//!
//! # Trade-off
//!
//! cuDNN's fused kernels are about twice as fast as the NVRTC kernel on dense blocks, but
//! cuDNN 9.19 builds no plan for per-row key bounds as a generic mask: its composite graph
//! with the rows' bounds as `[1, 1, s_q, 1]` INT32 tensors (column index plus a by-value key
//! base, compared with both bounds) gets no engine from the heuristics (measured on an H100,
//! 2026-12-07), and its band masks need cuDNN 9.21. Windows therefore stay on the row-bounds
//! kernel: one launch per block for any batch, at the NVRTC kernel's rate, with the tiles
//! outside each CTA's rows' runs skipped (inside a CTA spanning several short documents it
//! computes the tiles between them, masked). Head dim 128 only (the NVRTC kernel's, the
//! fallback of every batch); other head dims are refused.

use super::resolve::unsupported;
use super::PartSlot;
use crate::cuda::error::Result;
use mercury_kernels::cpu::AttnParams;
use mercury_kernels::cuda::cudnn::RaggedKey;
use mercury_kernels::cuda::AttnLaunch;
use mercury_plan::mask::{Boundaries, MaskCx};
use mercury_plan::AttnMask;

/// A masked attention block as the executor computes it (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedSplit {
    pub causal: bool,
    pub mask: AttnMask,
    /// The block's row bounds on its device: `lo` then `hi`, `sq` INT32 each
    /// ([`MaskedSplit::bounds_bytes`]; 0 until the executor allocates them).
    pub bounds: u64,
    /// Whether this run's batch leaves the block without a visible pair; `None` until the
    /// run's bounds are uploaded ([`MaskedSplit::needs_documents`]).
    pub empty: Option<bool>,
    /// The block's per-entry arrays for cuDNN's variable-sequence path (`ragged.rs`) on its
    /// device: `(address, INT32 elements per call)`, two calls' worth; `None` where the block
    /// stays on the NVRTC kernel whatever the batch (a window, no cuDNN, `--attention nvrtc`).
    pub ragged_arrays: Option<(u64, usize)>,
    /// This run's cuDNN calls (plan key, address of its arrays); empty: the NVRTC kernel.
    pub ragged: Vec<(RaggedKey, u64)>,
    /// Ring steps into one accumulator whose merges are deferred (`ops::defer_groups`): this
    /// block's group (an index among its rank's groups) and part; used for a batch only when
    /// every block of the group runs on cuDNN or sees nothing (`deferred`), else each block
    /// merges on its own.
    pub part: Option<(usize, PartSlot)>,
    /// Whether this run uses [`MaskedSplit::part`].
    pub deferred: bool,
}

/// A masked block's bounds for one run ([`MaskedSplit::for_run`]).
pub struct RunBounds {
    /// As uploaded: `lo`, zero padding, `hi` ([`MaskedSplit::bounds_bytes`]).
    pub flat: Vec<i32>,
    /// No row sees a key of the block.
    pub empty: bool,
    /// Each row's visible keys `[lo, hi)` (global positions, [`row_bounds`]).
    pub rows: Vec<[i32; 2]>,
}

impl MaskedSplit {
    /// Checks what the masked path needs of `l`: what the NVRTC kernel computes
    /// ([`AttnLaunch::validate`]: head dim 128, strides, alignment) and positions within INT32.
    pub fn new(l: &AttnLaunch, causal: bool, mask: AttnMask) -> Result<Self> {
        let d = l.dims;
        let end = (l.params.q_offset + d.sq).max(l.params.k_offset + d.sk);
        if end > i32::MAX as usize {
            return Err(unsupported(format!(
                "masked attention over {end} positions: the row bounds are INT32 positions"
            )));
        }
        let mut probe = *l;
        probe.bounds = Some((256, 256));
        probe
            .validate()
            .map_err(|e| unsupported(format!("the masked attention kernel: {e}")))?;
        Ok(MaskedSplit {
            causal,
            mask,
            bounds: 0,
            empty: None,
            ragged_arrays: None,
            ragged: Vec::new(),
            part: None,
            deferred: false,
        })
    }

    /// Whether the bounds depend on the run's document boundaries.
    pub fn needs_documents(&self) -> bool {
        self.mask.documents.is_some()
    }

    /// Bytes from `lo` to `hi` (16-byte aligned).
    fn hi_offset(sq: usize) -> usize {
        (sq * 4).div_ceil(16) * 16
    }

    /// Bytes of a block's bounds on its device, for `sq` query rows.
    pub fn bounds_bytes(sq: usize) -> usize {
        2 * Self::hi_offset(sq).max(16)
    }

    /// Whether cuDNN's variable-sequence path may take the block for some batch: documents and
    /// no window (windows stay on the NVRTC kernel: their rows' key runs all differ).
    pub fn ragged_eligible(&self) -> bool {
        self.needs_documents() && self.mask.left.is_none() && self.mask.right.is_none()
    }

    /// The block's row bounds for a run with boundaries `docs` (the plan's `documents` inputs,
    /// in order): as uploaded, whether no row sees a key of the block, and each row's keys.
    pub fn for_run(
        &self,
        l: &AttnLaunch,
        docs: &[Boundaries],
    ) -> std::result::Result<RunBounds, String> {
        let m = MaskCx::new(self.causal, &self.mask, docs)?;
        let b = row_bounds(&m, l.params.q_offset, l.dims.sq);
        let (k0, k1) = (
            l.params.k_offset as i64,
            (l.params.k_offset + l.dims.sk) as i64,
        );
        let empty = b
            .iter()
            .all(|r| (r[0] as i64).max(k0) >= (r[1] as i64).min(k1));
        let half = Self::hi_offset(l.dims.sq) / 4;
        let mut flat = vec![0; Self::bounds_bytes(l.dims.sq) / 4];
        for (r, x) in b.iter().enumerate() {
            flat[r] = x[0];
            flat[half + r] = x[1];
        }
        Ok(RunBounds {
            flat,
            empty,
            rows: b,
        })
    }

    /// `l` under this block's row bounds (what the kernel launches). The bounds carry the
    /// whole mask, causal included: the kernel's own causal test (global positions, `j <= i`)
    /// is off, since under documents causal is measured from each document's anchors (with
    /// `lower_right`, or query and key documents of different lengths, a query sees keys at
    /// later global positions).
    pub fn launch(&self, l: &AttnLaunch) -> AttnLaunch {
        let hi = self.bounds + Self::hi_offset(l.dims.sq) as u64;
        AttnLaunch {
            bounds: Some((self.bounds, hi)),
            params: AttnParams {
                causal: false,
                ..l.params
            },
            ..*l
        }
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use mercury_kernels::cpu::AttnDims;
    use mercury_kernels::cuda::{ElemType, Strided3};
    use rand::{Rng, SeedableRng};

    /// Random boundaries over `n` positions: 1-token documents, long ones, a padding tail.
    pub(in crate::cuda::ops) fn random_docs(
        rng: &mut impl Rng,
        n: usize,
        docs: usize,
    ) -> Boundaries {
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

    pub(in crate::cuda::ops) fn block(q0: usize, sq: usize, k0: usize, sk: usize) -> AttnLaunch {
        let t = |ptr: u64, s: usize| Strided3::dense(ptr, 1, s, 128);
        AttnLaunch {
            dims: AttnDims {
                b: 1,
                hq: 1,
                hk: 1,
                sq,
                sk,
                d: 128,
            },
            dv: 128,
            params: AttnParams {
                causal: false,
                scale: 0.088,
                q_offset: q0,
                k_offset: k0,
            },
            q: t(1 << 20, sq),
            k: t(2 << 20, sk),
            v: t(3 << 20, sk),
            o: t(4 << 20, sq),
            lse: Strided3::dense(5 << 20, 1, sq, 1),
            elem: ElemType::BF16,
            accumulate: false,
            bounds: None,
        }
    }

    /// What the kernel computes for the launch [`MaskedSplit::launch`] gives, pair by pair
    /// against `mercury_plan::mask`: key `c` of the block is visible to row `r` exactly when
    /// the mask makes (q_offset + r, k_offset + c) visible. The kernel's test (attention.cu):
    /// `lo[r] <= k_offset + c < hi[r]` read from the flat upload, and, when the launch is
    /// causal, `k_offset + c <= q_offset + r`. A block is empty exactly when no pair is
    /// visible. Fresh random documents (cross-attention ones of other lengths among them),
    /// windows and alignments every run.
    #[test]
    fn uploaded_bounds_give_exactly_the_visible_pairs() {
        let seed: u64 = rand::random();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for case in 0..300 {
            let n = rng.gen_range(1..300);
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
            let documents = match rng.gen_range(0..3) {
                0 => None,
                1 => Some([0, 0]),
                _ => Some([0, 1]),
            };
            let mask = AttnMask {
                left: pick(&mut rng),
                right: pick(&mut rng),
                documents,
                lower_right: documents.is_some() && rng.gen_bool(0.3),
            };
            let causal = rng.gen_bool(0.5);
            let m = MaskCx::new(causal, &mask, &all).unwrap();
            let q0 = rng.gen_range(0..n);
            let sq = rng.gen_range(1..=n - q0);
            let k0 = rng.gen_range(0..n);
            let sk = rng.gen_range(1..=n - k0);
            let mut l = block(q0, sq, k0, sk);
            // As resolved from the patch: its causal flag rides on the launch.
            l.params.causal = causal;
            let s = MaskedSplit::new(&l, causal, mask).unwrap();
            let RunBounds { flat, empty, .. } = s.for_run(&l, &all).unwrap();
            assert_eq!(flat.len() * 4, MaskedSplit::bounds_bytes(sq));
            let half = MaskedSplit::hi_offset(sq) / 4;
            let run = s.launch(&l);
            assert!(run.bounds.is_some());
            let ctx = format!(
                "seed {seed} case {case}: {mask:?} causal {causal} q {q0}+{sq} k {k0}+{sk}"
            );
            let mut any = false;
            for r in 0..sq {
                let (lo, hi) = (flat[r] as i64, flat[half + r] as i64);
                for c in 0..sk {
                    let want = m.visible(q0 + r, k0 + c);
                    let g = (k0 + c) as i64;
                    let kernel_causal =
                        !run.params.causal || run.params.k_offset + c <= run.params.q_offset + r;
                    assert_eq!(
                        lo <= g && g < hi && kernel_causal,
                        want,
                        "{ctx}: row {r} key {c}"
                    );
                    any |= want;
                }
            }
            assert_eq!(empty, !any, "{ctx}");
        }
    }

    /// Blocks the NVRTC kernel cannot compute are refused when resolved, naming why.
    #[test]
    fn other_head_dims_are_refused() {
        let mut l = block(0, 64, 0, 64);
        l.dims.d = 64;
        l.dv = 64;
        let e = MaskedSplit::new(&l, true, AttnMask::default()).unwrap_err();
        assert!(e.to_string().contains("head dim 128"), "{e}");
    }
}
