//! Comparison of outputs with a reference.

use rayon::prelude::*;
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
        let nonfinite = g.par_iter().filter(|x| !x.is_finite()).count();
        let num: f64 = g
            .par_iter()
            .zip(w)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        let den: f64 = w.par_iter().map(|b| b * b).sum::<f64>().sqrt().max(1e-300);
        let e = if nonfinite > 0 || g.len() != w.len() {
            f64::INFINITY
        } else {
            num / den
        };
        out.push((name.clone(), e, nonfinite));
    }
    out
}

/// The outputs of `declared` (the unscheduled kernel) with, per rank, the positions its
/// declared placement gives the rank: what `--check` holds each rank's pieces to. Ranks are
/// numbered row-major over the declared mesh, as the plan numbers them; `Err` when the plan
/// runs on another number of ranks.
pub fn declared_outputs(
    declared: &mercury_commir::Kernel,
    num_ranks: usize,
) -> Result<Vec<mercury_runtime::check::DeclaredOutput>, String> {
    use mercury_commir::Role;
    let mesh = &declared.mesh.shape;
    let n: usize = mesh.iter().product();
    if n != num_ranks {
        return Err(format!(
            "the plan runs on {num_ranks} ranks but the declared mesh {mesh:?} has {n}"
        ));
    }
    Ok(declared
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        .map(|b| {
            let shape = declared.shape(b);
            let placement = b.placement();
            let runs = (0..n)
                .map(|r| {
                    let coords = mercury_plan::coords_of(mesh, r);
                    shape
                        .iter()
                        .enumerate()
                        .map(|(d, &size)| {
                            mercury_commir::placement::dim_runs(
                                size,
                                &placement.dim(d),
                                mesh,
                                &coords,
                            )
                        })
                        .collect()
                })
                .collect();
            mercury_runtime::check::DeclaredOutput {
                name: b.name.clone(),
                shape,
                runs,
            }
        })
        .collect())
}
