//! Fresh random inputs, rounding to a dtype, and the errors `--check` reports.

use mercury_plan::*;
use std::collections::HashMap;

/// Fresh random inputs for every input buffer of a plan: uniform in [-1, 1), each value
/// rounded to nearest in its buffer's dtype (so in [-1, 1]), so a device holds exactly these
/// numbers and a reference computed from them in f64 needs no second rounding.
///
/// Deterministic in `seed` alone: element `i` of the `k`-th input buffer (plan order) is
/// drawn from the `i`-th 64-bit word pair of ChaCha8 stream `k`, whatever the number of
/// threads drawing them (the buffers of 512K-token attention hold 2^31 values each and are
/// drawn in parallel chunks, each seeking to its offset). Processes of one launched run that
/// pass the same seed hold the same inputs. A plan's document boundaries are drawn too
/// ([`super::random_documents`]).
pub fn random_inputs(plan: &Plan, seed: u64) -> HashMap<String, Vec<f64>> {
    let mut out: HashMap<String, Vec<f64>> = plan
        .buffers
        .iter()
        .filter(|b| b.role == Role::Input)
        .enumerate()
        .map(|(k, b)| {
            let mut v = vec![0f64; b.shape.iter().product::<usize>()];
            draw_input(seed, k, &mut v, |x| round_to(b.dtype, x));
            (b.name.clone(), v)
        })
        .collect();
    out.extend(super::random_documents(plan, seed));
    out
}

/// Fills `out` with the draws of input stream `k` of `seed`, uniform in [-1, 1) before `f`
/// maps each (to its dtype: [`round_to`], or the device's bit pattern): [`random_inputs`]'s
/// values, in parallel chunks that each seek to their offset.
pub fn draw_input<T: Send>(seed: u64, k: usize, out: &mut [T], f: impl Fn(f64) -> T + Sync) {
    use rand::{RngCore, SeedableRng};
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(k as u64);
        // One u64 (two 32-bit words) per value.
        rng.set_word_pos(2 * (c * CHUNK) as u128);
        for x in out {
            // 53 random bits: a multiple of 2^-52 in [-1, 1), exact in f64.
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64);
            *x = f(u - 1.0);
        }
    });
}

/// `x` rounded to nearest (ties to even) in `dtype`, as f64.
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        DType::BF16 => half::bf16::from_f64(x).to_f64(),
        DType::F16 => half::f16::from_f64(x).to_f64(),
    }
}

/// Largest relative error ‖a − b‖ / ‖b‖ over the outputs; NaN anywhere gives infinity.
pub fn relative_error(a: &HashMap<String, Vec<f64>>, b: &HashMap<String, Vec<f64>>) -> f64 {
    let mut worst: f64 = 0.0;
    for (name, x) in a {
        let Some(y) = b.get(name) else {
            return f64::INFINITY;
        };
        if x.len() != y.len() || x.iter().chain(y).any(|v| !v.is_finite()) {
            return f64::INFINITY;
        }
        let num: f64 = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q) * (p - q))
            .sum::<f64>()
            .sqrt();
        let den: f64 = y.iter().map(|q| q * q).sum::<f64>().sqrt().max(1e-300);
        worst = worst.max(num / den);
    }
    worst
}

/// How many elements of the outputs `a` holds differ from `b`'s by more than summing f32 values
/// in another order can explain: by more than 2^-16 of the root mean square of `b`'s output
/// (an f32 sum in another order moves an element by about 2^-24 of its addends; a bf16 or f16
/// element rounded the other way moves by at least 2^-11 of itself). Two [`Storage::Dtype`]
/// runs of plans that round at the same places differ in a handful of elements (the f32 values
/// that lay next to a rounding boundary); a plan that rounds somewhere else (a partial sum, a
/// softmax tile) in a large part of them. An output `b` lacks, or of another length, counts
/// whole; a non-finite value counts.
pub fn rounded_otherwise(a: &HashMap<String, Vec<f64>>, b: &HashMap<String, Vec<f64>>) -> usize {
    a.iter()
        .map(|(name, x)| rounded_otherwise_in(x, b.get(name).map(Vec::as_slice)))
        .sum()
}

/// [`rounded_otherwise`] for one output: `x` against `y` (all of `x` when `y` is missing or of
/// another length).
pub fn rounded_otherwise_in(x: &[f64], y: Option<&[f64]>) -> usize {
    let Some(y) = y.filter(|y| y.len() == x.len()) else {
        return x.len();
    };
    let finite = y.iter().filter(|q| q.is_finite());
    let rms = (finite.clone().map(|q| q * q).sum::<f64>() / finite.count().max(1) as f64).sqrt();
    let apart = rms * 2f64.powi(-16);
    x.iter()
        .zip(y)
        .filter(|(p, q)| {
            !crate::check::same_nonfinite(**p, **q)
                && (!p.is_finite() || !q.is_finite() || (*p - *q).abs() > apart)
        })
        .count()
}
