//! f64 reference rows of the attention backward, on the host, for one (batch, K/V head) group:
//! the planes of its query heads and of its K/V head, downloaded from the device.
//!
//! With P = exp(scale q·k - lse) over the visible keys and D = dO·O per query row:
//! dQ_r = scale Σ_j P_rj (dO_r·v_j - D_r) k_j, dV_j = Σ_(h, r) P_rj dO_r,
//! dK_j = scale Σ_(h, r) P_rj (dO_r·v_j - D_r) q_r (the sums over the group's query heads).
//!
//! Two references: *given* takes lse and O as the forward patch wrote them (it checks the
//! backward kernel on exactly its inputs); *exact* recomputes them in f64 from q, k, v (the
//! exact gradient of attention at the rounded inputs: the end-to-end error of forward and
//! backward). The exact one costs `g s_q s_kv (d_qk + d_v)` multiply-adds per group.

/// One `[s, d]` plane of a 4-D tensor as f64 rows.
pub(super) struct Plane {
    pub d: usize,
    pub data: Vec<f64>,
}

impl Plane {
    pub fn row(&self, r: usize) -> &[f64] {
        &self.data[r * self.d..(r + 1) * self.d]
    }
}

/// The host side of one (batch, K/V head) group: `g` query heads.
pub(super) struct Group {
    pub sq: usize,
    pub sk: usize,
    pub scale: f64,
    /// `Some(delta)`: key j visible to query r when r + delta >= j.
    pub causal: Option<i64>,
    pub q: Vec<Plane>,
    pub o: Vec<Plane>,
    pub d_o: Vec<Plane>,
    /// The forward's lse per query head and row.
    pub lse: Vec<Vec<f64>>,
    pub k: Plane,
    pub v: Plane,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `f(i)` for `i in 0..n` on the host's cores, in order.
pub(super) fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map(|t| t.get())
        .unwrap_or(1)
        .clamp(1, 32);
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|lo| {
                let f = &f;
                s.spawn(move || (lo..(lo + chunk).min(n)).map(f).collect::<Vec<T>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("reference thread panicked"))
            .collect()
    })
}

/// Per query head and row: (lse, D) of a reference.
pub(super) struct RowTerms {
    pub lse: Vec<Vec<f64>>,
    pub d: Vec<Vec<f64>>,
}

impl Group {
    /// Keys visible to query row `r`.
    pub fn visible(&self, r: usize) -> usize {
        match self.causal {
            None => self.sk,
            Some(delta) => (r as i64 + delta + 1).clamp(0, self.sk as i64) as usize,
        }
    }

    /// lse and D of every row: from the forward's values (`exact = false`) or recomputed in
    /// f64 (`exact = true`).
    pub fn terms(&self, exact: bool) -> RowTerms {
        let g = self.q.len();
        let per: Vec<(f64, f64)> = par_map(g * self.sq, |i| {
            let (h, r) = (i / self.sq, i % self.sq);
            let n = self.visible(r);
            if !exact {
                return (self.lse[h][r], dot(self.d_o[h].row(r), self.o[h].row(r)));
            }
            if n == 0 {
                return (f64::NEG_INFINITY, 0.0);
            }
            let qr = self.q[h].row(r);
            let logits: Vec<f64> = (0..n)
                .map(|j| self.scale * dot(qr, self.k.row(j)))
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = w.iter().sum();
            let mut o = vec![0.0; self.v.d];
            for (j, wj) in w.iter().enumerate() {
                for (a, b) in o.iter_mut().zip(self.v.row(j)) {
                    *a += wj * b;
                }
            }
            let dd = dot(self.d_o[h].row(r), &o) / z;
            (m + z.ln(), dd)
        });
        let (mut lse, mut d) = (vec![Vec::new(); g], vec![Vec::new(); g]);
        for (i, (l, dd)) in per.into_iter().enumerate() {
            lse[i / self.sq].push(l);
            d[i / self.sq].push(dd);
        }
        RowTerms { lse, d }
    }

    /// dQ of query row `r` of head `h` (within the group).
    pub fn dq_row(&self, t: &RowTerms, h: usize, r: usize) -> Vec<f64> {
        let mut out = vec![0.0; self.k.d];
        let (qr, dor) = (self.q[h].row(r), self.d_o[h].row(r));
        for j in 0..self.visible(r) {
            let p = (self.scale * dot(qr, self.k.row(j)) - t.lse[h][r]).exp();
            let ds = p * (dot(dor, self.v.row(j)) - t.d[h][r]);
            for (a, b) in out.iter_mut().zip(self.k.row(j)) {
                *a += self.scale * ds * b;
            }
        }
        out
    }

    /// (dK, dV) of key row `j`, summed over the group's query heads.
    pub fn dkdv_row(&self, t: &RowTerms, j: usize) -> (Vec<f64>, Vec<f64>) {
        let (mut dk, mut dv) = (vec![0.0; self.k.d], vec![0.0; self.v.d]);
        let (kj, vj) = (self.k.row(j), self.v.row(j));
        for h in 0..self.q.len() {
            for r in 0..self.sq {
                if self.visible(r) <= j {
                    continue;
                }
                let (qr, dor) = (self.q[h].row(r), self.d_o[h].row(r));
                let p = (self.scale * dot(qr, kj) - t.lse[h][r]).exp();
                let ds = p * (dot(dor, vj) - t.d[h][r]);
                for (a, b) in dv.iter_mut().zip(dor) {
                    *a += p * b;
                }
                for (a, b) in dk.iter_mut().zip(qr) {
                    *a += self.scale * ds * b;
                }
            }
        }
        (dk, dv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(d: usize, rows: &[&[f64]]) -> Plane {
        Plane {
            d,
            data: rows.iter().flat_map(|r| r.iter().copied()).collect(),
        }
    }

    /// Against a finite difference of the loss L = Σ dO·O through `kernels::cpu::attention`.
    #[test]
    fn gradients_match_finite_differences() {
        use mercury_kernels::cpu::{attention, AttnDims, AttnParams};
        let (sq, sk, d) = (3, 4, 2);
        let q = [0.3, -0.7, 1.1, 0.2, -0.4, 0.9];
        let k = [0.5, 0.1, -0.3, 0.8, 0.7, -0.6, 0.2, 0.4];
        let v = [1.0, -0.5, 0.3, 0.9, -0.8, 0.2, 0.6, 0.1];
        let d_o = [0.2, -0.1, 0.7, 0.4, -0.3, 0.5];
        let dims = AttnDims {
            b: 1,
            hq: 1,
            hk: 1,
            sq,
            sk,
            d,
        };
        let params = AttnParams {
            causal: true,
            scale: 0.7,
            q_offset: 1,
            k_offset: 0,
        };
        let fwd = |q: &[f64], k: &[f64], v: &[f64]| {
            let (mut o, mut lse) = (vec![0.0; sq * d], vec![0.0; sq]);
            attention(q, k, v, &mut o, &mut lse, dims, params);
            (o, lse)
        };
        let loss = |q: &[f64], k: &[f64], v: &[f64]| dot(&fwd(q, k, v).0, &d_o);
        let (o, lse) = fwd(&q, &k, &v);
        fn rows(x: &[f64], n: usize, d: usize) -> Vec<&[f64]> {
            (0..n).map(|i| &x[i * d..][..d]).collect()
        }
        let g = Group {
            sq,
            sk,
            scale: 0.7,
            causal: Some(1),
            q: vec![plane(d, &rows(&q, sq, d))],
            o: vec![plane(d, &rows(&o, sq, d))],
            d_o: vec![plane(d, &rows(&d_o, sq, d))],
            lse: vec![lse.clone()],
            k: plane(d, &rows(&k, sk, d)),
            v: plane(d, &rows(&v, sk, d)),
        };
        let eps = 1e-6;
        let fd = |which: usize, i: usize| {
            let mut t = [q.to_vec(), k.to_vec(), v.to_vec()];
            t[which][i] += eps;
            let up = loss(&t[0], &t[1], &t[2]);
            t[which][i] -= 2.0 * eps;
            (up - loss(&t[0], &t[1], &t[2])) / (2.0 * eps)
        };
        for exact in [false, true] {
            let t = g.terms(exact);
            for r in 0..sq {
                for (c, got) in g.dq_row(&t, 0, r).iter().enumerate() {
                    assert!((got - fd(0, r * d + c)).abs() < 1e-6, "dq {r} {c}");
                }
            }
            for j in 0..sk {
                let (dk, dv) = g.dkdv_row(&t, j);
                for c in 0..d {
                    assert!((dk[c] - fd(1, j * d + c)).abs() < 1e-6, "dk {j} {c}");
                    assert!((dv[c] - fd(2, j * d + c)).abs() < 1e-6, "dv {j} {c}");
                }
            }
        }
    }
}
