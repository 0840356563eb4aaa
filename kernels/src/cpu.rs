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
                for (c, l) in logits.iter_mut().enumerate() {
                    if p.causal && p.k_offset + c > p.q_offset + r {
                        *l = f64::NEG_INFINITY;
                        continue;
                    }
                    let krow = &k[((bi * hk + kh) * sk + c) * d..][..d];
                    *l = p.scale * qrow.iter().zip(krow).map(|(x, y)| x * y).sum::<f64>();
                    m = m.max(*l);
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

/// Merges a partial softmax result into an accumulator: rows of `d` values with one lse each.
pub fn lse_merge(
    o_acc: &mut [f64],
    lse_acc: &mut [f64],
    o_part: &[f64],
    lse_part: &[f64],
    d: usize,
) {
    for (r, (la, lp)) in lse_acc.iter_mut().zip(lse_part).enumerate() {
        let m = la.max(*lp);
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
