//! A run's document boundaries (the plan's [`Documents`] inputs, `mercury_plan::mask`): read
//! from the inputs and checked, or drawn at random for `--check` and the differential tests.

use super::ExecError;
use mercury_plan::*;
use std::collections::HashMap;

/// The run's document boundaries (`inputs` by the plan's [`Documents`] names), checked
/// (`mask::Boundaries::from_f64`).
pub fn documents(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
) -> Result<Vec<mask::Boundaries>, ExecError> {
    plan.documents
        .iter()
        .map(|d| {
            let v = inputs
                .get(&d.name)
                .ok_or_else(|| ExecError::Documents(d.name.clone(), "missing".into()))?;
            mask::Boundaries::from_f64(v, d.positions)
                .map_err(|m| ExecError::Documents(d.name.clone(), m))
        })
        .collect()
}

/// Fresh random document boundaries for every [`Documents`] input of a plan (by name), all
/// with one number of documents (so that any two pair up as a cross-attention's queries' and
/// keys'), deterministic in `seed`: few long documents (longer than a shard), many short ones,
/// or one token each, with empty documents and a padding tail (positions in no document) at
/// times. Values as f64, as [`super::execute`] takes its inputs.
pub fn random_documents(plan: &Plan, seed: u64) -> HashMap<String, Vec<f64>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    let Some(fewest) = plan.documents.iter().map(|d| d.positions).min() else {
        return HashMap::new();
    };
    let n = match rng.gen_range(0..10) {
        0..4 => rng.gen_range(1..=4.min(fewest)),
        4..8 => rng.gen_range(1..=fewest),
        _ => fewest,
    };
    plan.documents
        .iter()
        .map(|d| {
            let end = if rng.gen_range(0..4) == 0 {
                rng.gen_range(d.positions / 2..=d.positions)
            } else {
                d.positions
            };
            let mut cuts: Vec<usize> = if n == d.positions && end == n {
                (1..n).collect()
            } else {
                (1..n).map(|_| rng.gen_range(0..=end)).collect()
            };
            cuts.sort_unstable();
            let b: Vec<f64> = std::iter::once(0)
                .chain(cuts)
                .chain(std::iter::once(end))
                .map(|x| x as f64)
                .collect();
            (d.name.clone(), b)
        })
        .collect()
}
