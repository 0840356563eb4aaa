//! `--check`'s f64 rows of an attention backward (one `attention_bwd` patch over whole
//! buffers): a few dQ rows and a few dK, dV rows recomputed on the CPU with
//! `mercury_kernels::cpu::attention_bwd` from the inputs as the device holds them (q, k, v,
//! o, dO, lse: o and lse as given, so the rows check the backward on exactly its inputs).
//! A dQ row needs its own q, o, dO, lse rows and every key; a dK, dV row needs its key and
//! every query row of its group.

use mercury_kernels::cpu as k;
use mercury_runtime::cuda::HostBuffer;
use rand::Rng;
use std::collections::HashMap;

/// An operand: its buffer's name and extents, `[b, h, s, d]` or `[h, s, d]` (`lse` without d).
pub(crate) type Operand = (String, Vec<usize>);

/// The largest relative error of the sampled gradient rows (each of dQ, dK, dV rows), or
/// `None` when the shapes are not those of one backward over whole buffers. `ins` are
/// q, k, v, o, dO, lse; `outs` the dQ, dK, dV buffers' names.
pub(crate) fn attention_bwd_rows(
    ins: &[Operand],
    outs: [&HostBuffer; 3],
    inputs: &HashMap<String, HostBuffer>,
    (causal, scale): (bool, f64),
    rng: &mut impl Rng,
) -> Option<f64> {
    let [(qn, qs), (kn, ks), (vn, vs), (on, _), (don, _), (ln, _)] = ins else {
        return None;
    };
    let four = |s: &Vec<usize>| match s.len() {
        3 => Some([1, s[0], s[1], s[2]]),
        4 => Some([s[0], s[1], s[2], s[3]]),
        _ => None,
    };
    let ([b, hq, sq, d], [_, hk, sk, _], [.., dv]) = (four(qs)?, four(ks)?, four(vs)?);
    if hk == 0 || hq % hk != 0 {
        return None;
    }
    let g = hq / hk;
    let buf = |n: &String| inputs.get(n);
    let (q, kk, v, o, d_o, lse) = (buf(qn)?, buf(kn)?, buf(vn)?, buf(on)?, buf(don)?, buf(ln)?);
    let [gq, gk, gv] = outs;
    if gq.len() != b * hq * sq * d || gk.len() != b * hk * sk * d || gv.len() != b * hk * sk * dv {
        return None;
    }
    let rel = |got: &[f64], want: &[f64]| {
        if got.iter().any(|x| !x.is_finite()) {
            return f64::INFINITY;
        }
        let num: f64 = got
            .iter()
            .zip(want)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f64>()
            .sqrt();
        num / want.iter().map(|y| y * y).sum::<f64>().sqrt().max(1e-300)
    };
    let one = |h: usize, s: usize, dd: usize| k::AttnDims {
        b: 1,
        hq: h,
        hk: 1,
        sq: s,
        sk: 1,
        d: dd,
    };
    let mut worst: f64 = 0.0;
    // dQ rows: one query row against every key of its head.
    for _ in 0..3 {
        let (bi, h, r) = (
            rng.gen_range(0..b),
            rng.gen_range(0..hq),
            rng.gen_range(0..sq),
        );
        let (row, kh) = ((bi * hq + h) * sq + r, h / g);
        let kv = (bi * hk + kh) * sk;
        let (mut dq, mut dk, mut dvv) = (vec![0.0; d], vec![0.0; sk * d], vec![0.0; sk * dv]);
        k::attention_bwd(
            k::AttnBwdInputs {
                q: &q.slice_f64(row * d, d),
                k: &kk.slice_f64(kv * d, sk * d),
                v: &v.slice_f64(kv * dv, sk * dv),
                o: &o.slice_f64(row * dv, dv),
                d_o: &d_o.slice_f64(row * dv, dv),
                lse: &lse.slice_f64(row, 1),
            },
            k::AttnGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dvv,
            },
            k::AttnDims { sk, ..one(1, 1, d) },
            dv,
            k::AttnParams {
                causal,
                scale,
                q_offset: r,
                k_offset: 0,
            },
            false,
        );
        worst = worst.max(rel(&gq.slice_f64(row * d, d), &dq));
    }
    // dK, dV rows: one key against every query row of its group (heads kh * g ..).
    for _ in 0..3 {
        let (bi, kh, j) = (
            rng.gen_range(0..b),
            rng.gen_range(0..hk),
            rng.gen_range(0..sk),
        );
        let first = (bi * hq + kh * g) * sq;
        let kv = (bi * hk + kh) * sk + j;
        let (mut dq, mut dk, mut dvv) = (vec![0.0; g * sq * d], vec![0.0; d], vec![0.0; dv]);
        k::attention_bwd(
            k::AttnBwdInputs {
                q: &q.slice_f64(first * d, g * sq * d),
                k: &kk.slice_f64(kv * d, d),
                v: &v.slice_f64(kv * dv, dv),
                o: &o.slice_f64(first * dv, g * sq * dv),
                d_o: &d_o.slice_f64(first * dv, g * sq * dv),
                lse: &lse.slice_f64(first, g * sq),
            },
            k::AttnGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dvv,
            },
            one(g, sq, d),
            dv,
            k::AttnParams {
                causal,
                scale,
                q_offset: 0,
                k_offset: j,
            },
            false,
        );
        worst = worst.max(rel(&gk.slice_f64(kv * d, d), &dk));
        worst = worst.max(rel(&gv.slice_f64(kv * dv, dv), &dvv));
    }
    Some(worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::DType;
    use mercury_runtime::cuda::HostData;
    use rand::SeedableRng;

    fn host(v: Vec<f64>) -> HostBuffer {
        HostBuffer {
            dtype: DType::F64,
            data: HostData::F64(v),
        }
    }

    /// The rows of a whole backward computed on the CPU pass; a wrong dK row fails.
    #[test]
    fn rows_of_a_cpu_backward_pass_and_a_wrong_one_fails() {
        let (b, hq, hk, sq, sk, d, dv) = (1, 4, 2, 6, 5, 4, 3);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut rand = |n: usize| {
            (0..n)
                .map(|_| rng.gen_range(-1.0..1.0))
                .collect::<Vec<f64>>()
        };
        let (q, kk, v) = (
            rand(b * hq * sq * d),
            rand(b * hk * sk * d),
            rand(b * hk * sk * dv),
        );
        let (o, d_o, lse) = (
            rand(b * hq * sq * dv),
            rand(b * hq * sq * dv),
            rand(b * hq * sq),
        );
        let (mut gq, mut gk, mut gv) =
            (vec![0.0; q.len()], vec![0.0; kk.len()], vec![0.0; v.len()]);
        let params = k::AttnParams {
            causal: true,
            scale: 0.5,
            q_offset: 0,
            k_offset: 0,
        };
        k::attention_bwd(
            k::AttnBwdInputs {
                q: &q,
                k: &kk,
                v: &v,
                o: &o,
                d_o: &d_o,
                lse: &lse,
            },
            k::AttnGrads {
                dq: &mut gq,
                dk: &mut gk,
                dv: &mut gv,
            },
            k::AttnDims {
                b,
                hq,
                hk,
                sq,
                sk,
                d,
            },
            dv,
            params,
            false,
        );
        let names = ["q", "k", "v", "o", "do", "lse"];
        let inputs: HashMap<String, HostBuffer> = names
            .iter()
            .zip([q, kk, v, o, d_o, lse])
            .map(|(n, x)| (n.to_string(), host(x)))
            .collect();
        let ops: Vec<Operand> = names
            .iter()
            .zip([
                vec![b, hq, sq, d],
                vec![b, hk, sk, d],
                vec![b, hk, sk, dv],
                vec![b, hq, sq, dv],
                vec![b, hq, sq, dv],
                vec![b, hq, sq],
            ])
            .map(|(n, s)| (n.to_string(), s))
            .collect();
        let check = |gk: &[f64], seed: u64| {
            let outs = [host(gq.clone()), host(gk.to_vec()), host(gv.clone())];
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            attention_bwd_rows(
                &ops,
                [&outs[0], &outs[1], &outs[2]],
                &inputs,
                (true, 0.5),
                &mut r,
            )
            .unwrap()
        };
        assert!(check(&gk, 1) < 1e-12);
        // Every key row wrong: any sampled dK row shows it.
        let bad: Vec<f64> = gk.iter().map(|x| x * 1.5 + 0.1).collect();
        assert!(check(&bad, 1) > 0.1);
    }
}
