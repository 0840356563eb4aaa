//! f64 reference implementations of the patches and combine kernels. Row-major, contiguous.

/// Shape of an attention tile: q `[b, hq, sq, d]`, k/v `[b, hk, sk, d]`, `hq % hk == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttnDims {
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
}

/// Causal masking and scaling of one attention call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnParams {
    pub causal: bool,
    pub scale: f64,
    /// Global position of the first query row and of the first key row (for causal masks).
    pub q_offset: usize,
    pub k_offset: usize,
}

/// `out[m, n] (+)= a[m, k] * b[k, n]`.
pub fn gemm(m: usize, n: usize, k: usize, a: &[f64], b: &[f64], out: &mut [f64], accumulate: bool) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && out.len() >= m * n,
        "gemm operand too small"
    );
    for i in 0..m {
        for j in 0..n {
            let mut s = if accumulate { out[i * n + j] } else { 0.0 };
            for p in 0..k {
                s += a[i * k + p] * b[p * n + j];
            }
            out[i * n + j] = s;
        }
    }
}

/// Attention forward returning normalised output and log-sum-exp per query row.
/// Fully masked rows give o = 0 and lse = -inf. Values have the head dim of the queries.
pub fn attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    o: &mut [f64],
    lse: &mut [f64],
    dims: AttnDims,
    p: AttnParams,
) {
    attention_dv(q, k, v, o, lse, dims, dims.d, p)
}

/// Attention forward whose values (and output) have head dim `dv`, which may differ from the
/// query/key head dim `dims.d` (multi-head latent attention): v is `[b, hk, sk, dv]`, o
/// `[b, hq, sq, dv]`. Panics if a slice is shorter than its shape says.
#[allow(clippy::too_many_arguments)]
pub fn attention_dv(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    o: &mut [f64],
    lse: &mut [f64],
    dims: AttnDims,
    dv: usize,
    p: AttnParams,
) {
    attention_rows(q, k, v, o, lse, dims, dv, p.scale, &|r| p.keys(r, dims.sk))
}

impl AttnParams {
    /// The keys (tile rows `c`) query row `r` of a tile of `sk` keys sees under this causal
    /// mask: all of them, or those at positions up to the query's.
    pub fn keys(&self, r: usize, sk: usize) -> std::ops::Range<usize> {
        if self.causal {
            0..(self.q_offset + r + 1)
                .saturating_sub(self.k_offset)
                .min(sk)
        } else {
            0..sk
        }
    }
}

/// [`attention_dv`] under any mask whose visible keys of a row are one run: `keys(r)` is the
/// run of key rows query row `r` sees (a run past `sk` is cut to it; an empty one gives o = 0
/// and lse = -inf), `scale` multiplies the logits. Panics if a slice is shorter than its shape
/// says.
#[allow(clippy::too_many_arguments)]
pub fn attention_rows(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    o: &mut [f64],
    lse: &mut [f64],
    dims: AttnDims,
    dv: usize,
    scale: f64,
    keys: &dyn Fn(usize) -> std::ops::Range<usize>,
) {
    let AttnDims {
        b,
        hq,
        hk,
        sq,
        sk,
        d,
    } = dims;
    assert!(
        hk > 0 && hq % hk == 0,
        "query heads must be a multiple of key heads"
    );
    let rows_q = b * hq * sq;
    let rows_k = b * hk * sk;
    assert!(
        q.len() >= rows_q * d
            && k.len() >= rows_k * d
            && v.len() >= rows_k * dv
            && o.len() >= rows_q * dv
            && lse.len() >= rows_q,
        "attention operand too small"
    );
    let group = hq / hk;
    let mut logits = vec![0.0; sk];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for r in 0..sq {
                let qrow = &q[((bi * hq + h) * sq + r) * d..][..d];
                let mut m = f64::NEG_INFINITY;
                let seen = keys(r);
                for (c, l) in logits.iter_mut().enumerate() {
                    if !seen.contains(&c) {
                        *l = f64::NEG_INFINITY;
                        continue;
                    }
                    let krow = &k[((bi * hk + kh) * sk + c) * d..][..d];
                    *l = scale * qrow.iter().zip(krow).map(|(x, y)| x * y).sum::<f64>();
                    m = nan_max(m, *l);
                }
                let orow = &mut o[((bi * hq + h) * sq + r) * dv..][..dv];
                orow.iter_mut().for_each(|x| *x = 0.0);
                let lidx = (bi * hq + h) * sq + r;
                if m == f64::NEG_INFINITY {
                    lse[lidx] = f64::NEG_INFINITY;
                    continue;
                }
                let mut denom = 0.0;
                for (c, l) in logits.iter().enumerate() {
                    if *l == f64::NEG_INFINITY {
                        continue;
                    }
                    let w = (l - m).exp();
                    denom += w;
                    let vrow = &v[((bi * hk + kh) * sk + c) * dv..][..dv];
                    for (x, y) in orow.iter_mut().zip(vrow) {
                        *x += w * y;
                    }
                }
                orow.iter_mut().for_each(|x| *x /= denom);
                lse[lidx] = m + denom.ln();
            }
        }
    }
}

/// The forward's tensors an attention backward reads: q `[b, hq, sq, d]`, k `[b, hk, sk, d]`,
/// v `[b, hk, sk, dv]`, the forward's normalised output o and its gradient d_o `[b, hq, sq, dv]`,
/// and the forward's log-sum-exp lse `[b, hq, sq]` (natural log of the softmax denominator of
/// the scaled logits, over *every* key of the row, not only this call's).
#[derive(Debug, Clone, Copy)]
pub struct AttnBwdInputs<'a> {
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    pub o: &'a [f64],
    pub d_o: &'a [f64],
    pub lse: &'a [f64],
}

/// The gradients an attention backward writes: dq `[b, hq, sq, d]`, dk `[b, hk, sk, d]`, dv
/// `[b, hk, sk, dv]` (the key/value gradients summed over each group's query heads).
#[derive(Debug)]
pub struct AttnGrads<'a> {
    pub dq: &'a mut [f64],
    pub dk: &'a mut [f64],
    pub dv: &'a mut [f64],
}

/// Attention backward on one (query block, key block) tile, given the forward's output and
/// log-sum-exp over all keys (FlashAttention-2's backward, Dao 2023, Algorithm 2, in f64):
///
/// - `P = exp(scale * q k^T - lse)`: the probabilities themselves, exact in every key block
///   because `lse` covers the whole row (entries the causal mask hides are 0; a row whose lse
///   is `-inf`, fully masked in the forward, has `P = 0` and contributes nothing: zero
///   gradients, never NaN);
/// - `dV = P^T dO`, `dP = dO V^T`, `D = rowsum(dO * O)` (once per query row of the call),
///   `dS = P * (dP - D)`, `dQ = scale * dS K`, `dK = scale * dS^T Q`;
/// - grouped-query attention: query head `h` reads key/value head `h / (hq / hk)`, and dK, dV
///   sum over the group's query heads; v may have another head dim `dv` than q and k (MLA).
///
/// So dQ is a partial sum over key blocks and dK, dV partial sums over query blocks: a
/// schedule adds the calls' results. With `accumulate` the gradients are added to `g`'s
/// contents, otherwise `g` is overwritten. Causal: key `k_offset + c` is visible to query
/// `q_offset + r` iff it is not larger (the forward's rule). Panics if a slice is shorter than
/// its shape says.
pub fn attention_bwd(
    x: AttnBwdInputs,
    g: AttnGrads,
    dims: AttnDims,
    dv: usize,
    p: AttnParams,
    accumulate: bool,
) {
    attention_bwd_rows(x, g, dims, dv, p.scale, &|r| p.keys(r, dims.sk), accumulate)
}

/// [`attention_bwd`] under any mask whose visible keys of a row are one run (`keys`, as
/// [`attention_rows`] reads it: the forward's mask).
pub fn attention_bwd_rows(
    x: AttnBwdInputs,
    g: AttnGrads,
    dims: AttnDims,
    dv: usize,
    scale: f64,
    keys: &dyn Fn(usize) -> std::ops::Range<usize>,
    accumulate: bool,
) {
    let AttnDims {
        b,
        hq,
        hk,
        sq,
        sk,
        d,
    } = dims;
    assert!(
        hk > 0 && hq % hk == 0,
        "query heads must be a multiple of key heads"
    );
    let (rows_q, rows_k) = (b * hq * sq, b * hk * sk);
    assert!(
        x.q.len() >= rows_q * d
            && x.k.len() >= rows_k * d
            && x.v.len() >= rows_k * dv
            && x.o.len() >= rows_q * dv
            && x.d_o.len() >= rows_q * dv
            && x.lse.len() >= rows_q
            && g.dq.len() >= rows_q * d
            && g.dk.len() >= rows_k * d
            && g.dv.len() >= rows_k * dv,
        "attention backward operand too small"
    );
    if !accumulate {
        g.dq[..rows_q * d].iter_mut().for_each(|x| *x = 0.0);
        g.dk[..rows_k * d].iter_mut().for_each(|x| *x = 0.0);
        g.dv[..rows_k * dv].iter_mut().for_each(|x| *x = 0.0);
    }
    let group = hq / hk;
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for r in 0..sq {
                let row = (bi * hq + h) * sq + r;
                let lse = x.lse[row];
                if lse == f64::NEG_INFINITY {
                    continue;
                }
                let qrow = &x.q[row * d..][..d];
                let orow = &x.o[row * dv..][..dv];
                let dorow = &x.d_o[row * dv..][..dv];
                let delta: f64 = dorow.iter().zip(orow).map(|(a, b)| a * b).sum();
                let seen = keys(r);
                for c in seen.start.min(sk)..seen.end.min(sk) {
                    let kr = (bi * hk + kh) * sk + c;
                    let krow = &x.k[kr * d..][..d];
                    let vrow = &x.v[kr * dv..][..dv];
                    let s = scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>();
                    let prob = (s - lse).exp();
                    let dp: f64 = dorow.iter().zip(vrow).map(|(a, b)| a * b).sum();
                    let ds = prob * (dp - delta) * scale;
                    for (y, a) in g.dv[kr * dv..][..dv].iter_mut().zip(dorow) {
                        *y += prob * a;
                    }
                    for (y, a) in g.dq[row * d..][..d].iter_mut().zip(krow) {
                        *y += ds * a;
                    }
                    for (y, a) in g.dk[kr * d..][..d].iter_mut().zip(qrow) {
                        *y += ds * a;
                    }
                }
            }
        }
    }
}

/// The larger of `a` and `b`, NaN when either is (`f64::max` would drop a NaN): a NaN logit
/// or lse makes its row NaN, as torch's attention does, rather than a row that sees no key.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Merges a partial softmax result into an accumulator: rows of `d` values with one lse each
/// (a NaN in either makes the row NaN).
pub fn lse_merge(
    o_acc: &mut [f64],
    lse_acc: &mut [f64],
    o_part: &[f64],
    lse_part: &[f64],
    d: usize,
) {
    for (r, (la, lp)) in lse_acc.iter_mut().zip(lse_part).enumerate() {
        let m = nan_max(*la, *lp);
        if m == f64::NEG_INFINITY {
            continue;
        }
        let (wa, wp) = ((*la - m).exp(), (*lp - m).exp());
        let new = m + (wa + wp).ln();
        let (sa, sp) = ((*la - new).exp(), (*lp - new).exp());
        for c in 0..d {
            let i = r * d + c;
            o_acc[i] = o_acc[i] * sa + o_part[i] * sp;
        }
        *la = new;
    }
}

/// `acc += part`.
pub fn add(acc: &mut [f64], part: &[f64]) {
    for (a, p) in acc.iter_mut().zip(part) {
        *a += p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_input_makes_its_rows_nan_not_empty() {
        // q [1, 1, 2, 2], k = v [1, 1, 2, 2]: a NaN in q's row 0 makes that row NaN (not the
        // o = 0, lse = -inf of a row that sees no key); a NaN in k's key 0 every row seeing it.
        let (d, s) = (2, 2);
        let dims = AttnDims {
            b: 1,
            hq: 1,
            hk: 1,
            sq: s,
            sk: s,
            d,
        };
        let p = AttnParams {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 0,
        };
        let kv = [0.5, -0.25, 1.0, 0.75];
        let run = |q: &[f64], k: &[f64]| {
            let (mut o, mut lse) = (vec![0.0; s * d], vec![0.0; s]);
            attention(q, k, &kv, &mut o, &mut lse, dims, p);
            (o, lse)
        };
        let (o, lse) = run(&[f64::NAN, 0.0, 0.3, 0.2], &kv);
        assert!(o[..d].iter().all(|x| x.is_nan()) && lse[0].is_nan());
        assert!(o[d..].iter().all(|x| x.is_finite()) && lse[1].is_finite());
        let (o, lse) = run(&[0.1, 0.2, 0.3, 0.2], &[f64::NAN, 0.0, 1.0, 0.75]);
        assert!(o.iter().all(|x| x.is_nan()) && lse.iter().all(|x| x.is_nan()));
        // A NaN part merged into an empty accumulator stays NaN.
        let (mut oa, mut la) = (vec![0.0; 2], vec![f64::NEG_INFINITY]);
        lse_merge(&mut oa, &mut la, &[1.0, 2.0], &[f64::NAN], 2);
        assert!(oa.iter().all(|x| x.is_nan()) && la[0].is_nan());
    }

    #[test]
    fn merge_of_halves_equals_whole() {
        let dims = AttnDims {
            b: 1,
            hq: 2,
            hk: 1,
            sq: 3,
            sk: 4,
            d: 2,
        };
        let q: Vec<f64> = (0..12).map(|i| (i as f64 * 0.37).sin()).collect();
        let k: Vec<f64> = (0..8).map(|i| (i as f64 * 0.71).cos()).collect();
        let v: Vec<f64> = (0..8).map(|i| i as f64 * 0.1 - 0.3).collect();
        let p = AttnParams {
            causal: false,
            scale: 0.5,
            q_offset: 0,
            k_offset: 0,
        };
        let (mut o, mut l) = (vec![0.0; 12], vec![0.0; 6]);
        attention(&q, &k, &v, &mut o, &mut l, dims, p);
        let half = AttnDims { sk: 2, ..dims };
        let (mut o1, mut l1, mut o2, mut l2) =
            (vec![0.0; 12], vec![0.0; 6], vec![0.0; 12], vec![0.0; 6]);
        attention(&q, &k[..4], &v[..4], &mut o1, &mut l1, half, p);
        attention(&q, &k[4..], &v[4..], &mut o2, &mut l2, half, p);
        lse_merge(&mut o1, &mut l1, &o2, &l2, 2);
        for (a, b) in o.iter().zip(&o1).chain(l.iter().zip(&l1)) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn value_head_dim_differs_from_query_head_dim() {
        // One head, 2 queries, 3 keys, d = 2, dv = 3: each output row is the softmax-weighted
        // sum of 3-wide value rows.
        let dims = AttnDims {
            b: 1,
            hq: 1,
            hk: 1,
            sq: 2,
            sk: 3,
            d: 2,
        };
        let p = AttnParams {
            causal: false,
            scale: 0.7,
            q_offset: 0,
            k_offset: 0,
        };
        let q = [0.3, -0.2, 1.0, 0.5];
        let k = [0.1, 0.4, -0.6, 0.2, 0.9, -0.3];
        let v = [1.0, 2.0, 3.0, -1.0, 0.0, 1.0, 0.5, 0.5, -2.0];
        let (mut o, mut l) = (vec![0.0; 6], vec![0.0; 2]);
        attention_dv(&q, &k, &v, &mut o, &mut l, dims, 3, p);
        for r in 0..2 {
            let logits: Vec<f64> = (0..3)
                .map(|c| 0.7 * (q[2 * r] * k[2 * c] + q[2 * r + 1] * k[2 * c + 1]))
                .collect();
            let z: f64 = logits.iter().map(|x| x.exp()).sum();
            for j in 0..3 {
                let want: f64 = (0..3).map(|c| logits[c].exp() / z * v[3 * c + j]).sum();
                assert!((o[3 * r + j] - want).abs() < 1e-12);
            }
            assert!((l[r] - z.ln()).abs() < 1e-12);
        }
    }

    #[test]
    fn causal_fully_masked_rows() {
        let dims = AttnDims {
            b: 1,
            hq: 1,
            hk: 1,
            sq: 2,
            sk: 2,
            d: 1,
        };
        let p = AttnParams {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 2,
        };
        let (mut o, mut l) = (vec![9.0; 2], vec![0.0; 2]);
        attention(
            &[1.0, 2.0],
            &[1.0, 1.0],
            &[3.0, 4.0],
            &mut o,
            &mut l,
            dims,
            p,
        );
        assert_eq!(o, vec![0.0, 0.0]);
        assert!(l.iter().all(|x| *x == f64::NEG_INFINITY));
    }

    /// Deterministic pseudo-random values in [-1, 1).
    fn vals(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// `sum(dO * O(q, k, v))`: the loss whose gradient the backward computes.
    fn loss(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        d_o: &[f64],
        dims: AttnDims,
        dv: usize,
        p: AttnParams,
    ) -> f64 {
        let rows = dims.b * dims.hq * dims.sq;
        let (mut o, mut l) = (vec![0.0; rows * dv], vec![0.0; rows]);
        attention_dv(q, k, v, &mut o, &mut l, dims, dv, p);
        o.iter().zip(d_o).map(|(a, b)| a * b).sum()
    }

    /// The backward's gradients against central differences of the forward, for causal
    /// grouped-query attention with another value head dim, and with a query row no key is
    /// visible to (zero gradient, not NaN).
    #[test]
    fn backward_matches_finite_differences() {
        let dims = AttnDims {
            b: 2,
            hq: 4,
            hk: 2,
            sq: 3,
            sk: 5,
            d: 3,
        };
        let dv = 2;
        for (causal, q_offset, k_offset) in [(false, 0, 0), (true, 2, 0), (true, 0, 1)] {
            let p = AttnParams {
                causal,
                scale: 0.6,
                q_offset,
                k_offset,
            };
            let rq = dims.b * dims.hq * dims.sq;
            let rk = dims.b * dims.hk * dims.sk;
            let (q, k, v, d_o) = (
                vals(rq * dims.d, 1),
                vals(rk * dims.d, 2),
                vals(rk * dv, 3),
                vals(rq * dv, 4),
            );
            let (mut o, mut lse) = (vec![0.0; rq * dv], vec![0.0; rq]);
            attention_dv(&q, &k, &v, &mut o, &mut lse, dims, dv, p);
            let (mut dq, mut dk, mut dvv) =
                (vec![7.0; q.len()], vec![7.0; k.len()], vec![7.0; v.len()]);
            attention_bwd(
                AttnBwdInputs {
                    q: &q,
                    k: &k,
                    v: &v,
                    o: &o,
                    d_o: &d_o,
                    lse: &lse,
                },
                AttnGrads {
                    dq: &mut dq,
                    dk: &mut dk,
                    dv: &mut dvv,
                },
                dims,
                dv,
                p,
                false,
            );
            let h = 1e-6;
            let check = |which: usize, grad: &[f64]| {
                let base = [&q, &k, &v][which];
                for i in 0..base.len() {
                    let mut plus = [q.clone(), k.clone(), v.clone()];
                    let mut minus = plus.clone();
                    plus[which][i] += h;
                    minus[which][i] -= h;
                    let num = (loss(&plus[0], &plus[1], &plus[2], &d_o, dims, dv, p)
                        - loss(&minus[0], &minus[1], &minus[2], &d_o, dims, dv, p))
                        / (2.0 * h);
                    assert!(
                        (num - grad[i]).abs() < 1e-7,
                        "causal {causal} offsets {q_offset}/{k_offset}: d{} [{i}] {} vs numerical {num}",
                        ["q", "k", "v"][which],
                        grad[i]
                    );
                }
            };
            check(0, &dq);
            check(1, &dk);
            check(2, &dvv);
            assert!(dq.iter().chain(&dk).chain(&dvv).all(|x| x.is_finite()));
            if causal && k_offset == 1 {
                // Query 0 sees no key: its lse is -inf and its gradient zero.
                assert_eq!(lse[0], f64::NEG_INFINITY);
                assert!(dq[..dims.d].iter().all(|x| *x == 0.0));
            }
        }
    }

    /// dQ summed over key blocks and dK, dV over query blocks equal the whole tile's, with
    /// the forward's lse over all keys and causal offsets per block.
    #[test]
    fn backward_blocks_sum_to_whole() {
        let dims = AttnDims {
            b: 1,
            hq: 2,
            hk: 1,
            sq: 4,
            sk: 4,
            d: 2,
        };
        let dv = 3;
        let p = AttnParams {
            causal: true,
            scale: 0.9,
            q_offset: 0,
            k_offset: 0,
        };
        let (q, k, v, d_o) = (vals(16, 5), vals(8, 6), vals(12, 7), vals(24, 8));
        let (mut o, mut lse) = (vec![0.0; 24], vec![0.0; 8]);
        attention_dv(&q, &k, &v, &mut o, &mut lse, dims, dv, p);
        let x = AttnBwdInputs {
            q: &q,
            k: &k,
            v: &v,
            o: &o,
            d_o: &d_o,
            lse: &lse,
        };
        let (mut dq, mut dk, mut dvv) = (vec![0.0; 16], vec![0.0; 8], vec![0.0; 12]);
        attention_bwd(
            x,
            AttnGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dvv,
            },
            dims,
            dv,
            p,
            false,
        );
        // Blocks of 2 queries x 2 keys, per head (rows of q are [h, s]).
        let (mut bq, mut bk, mut bv) = (vec![0.0; 16], vec![0.0; 8], vec![0.0; 12]);
        let block = AttnDims {
            hq: 1,
            hk: 1,
            sq: 2,
            sk: 2,
            ..dims
        };
        for h in 0..2 {
            for qb in 0..2 {
                for kb in 0..2 {
                    let qr = h * 4 + qb * 2;
                    let (mut gq, mut gk, mut gv) = (vec![0.0; 4], vec![0.0; 4], vec![0.0; 6]);
                    attention_bwd(
                        AttnBwdInputs {
                            q: &q[qr * 2..][..4],
                            k: &k[kb * 4..][..4],
                            v: &v[kb * 6..][..6],
                            o: &o[qr * 3..][..6],
                            d_o: &d_o[qr * 3..][..6],
                            lse: &lse[qr..][..2],
                        },
                        AttnGrads {
                            dq: &mut gq,
                            dk: &mut gk,
                            dv: &mut gv,
                        },
                        block,
                        dv,
                        AttnParams {
                            q_offset: qb * 2,
                            k_offset: kb * 2,
                            ..p
                        },
                        false,
                    );
                    add(&mut bq[qr * 2..][..4], &gq);
                    add(&mut bk[kb * 4..][..4], &gk);
                    add(&mut bv[kb * 6..][..6], &gv);
                }
            }
        }
        for (a, b) in dq
            .iter()
            .zip(&bq)
            .chain(dk.iter().zip(&bk))
            .chain(dvv.iter().zip(&bv))
        {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn gemm_small() {
        let mut c = vec![1.0; 4];
        gemm(
            2,
            2,
            2,
            &[1.0, 2.0, 3.0, 4.0],
            &[5.0, 6.0, 7.0, 8.0],
            &mut c,
            true,
        );
        assert_eq!(c, vec![20.0, 23.0, 44.0, 51.0]);
    }
}
