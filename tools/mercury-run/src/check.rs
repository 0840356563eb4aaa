//! Comparison of outputs with a reference.

use std::collections::HashMap;

/// Relative error ‖got − want‖ / ‖want‖ per output, and whether any value is not finite.
pub fn compare(
    got: &HashMap<String, Vec<f64>>,
    want: &HashMap<String, Vec<f64>>,
) -> Vec<(String, f64, usize)> {
    let mut out = Vec::new();
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let w = &want[name];
        let Some(g) = got.get(name) else {
            out.push((name.clone(), f64::INFINITY, w.len()));
            continue;
        };
        let nonfinite = g.iter().filter(|x| !x.is_finite()).count();
        let num: f64 = g
            .iter()
            .zip(w)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        let den: f64 = w.iter().map(|b| b * b).sum::<f64>().sqrt().max(1e-300);
        let e = if nonfinite > 0 || g.len() != w.len() {
            f64::INFINITY
        } else {
            num / den
        };
        out.push((name.clone(), e, nonfinite));
    }
    out
}
