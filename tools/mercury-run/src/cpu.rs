//! The CPU backend: the f64 reference executor on the scheduled plan and on the single-device
//! plan, with the same fresh random inputs.

use crate::{args::Args, check, Compiled, Failure};
use mercury_plan::Plan;
use mercury_runtime::cpu::{execute, random_inputs};

/// Elements the CPU executor accepts per run (all ranks' slots together).
const LIMIT: usize = 1 << 26;

/// Runs the plan (and `--check`s it); returns the executor's time in seconds.
pub fn run(a: &Args, c: &Compiled, plan: &Plan) -> Result<f64, Failure> {
    let elements: usize = plan
        .ranks
        .iter()
        .flat_map(|r| &r.slots)
        .map(|s| s.shape.iter().product::<usize>())
        .sum();
    if elements > LIMIT {
        return Err(Failure::Input(format!(
            "mercury-run: the plan holds {elements} elements over its ranks, too many for the CPU executor (limit {LIMIT}); use small shapes or --backend cuda"
        )));
    }
    if let Some(n) = a.ranks {
        if n != plan.num_ranks() {
            return Err(Failure::Input(format!(
                "mercury-run: --ranks {n} but the mesh {:?} has {} ranks",
                plan.mesh,
                plan.num_ranks()
            )));
        }
    }
    let seed = a.seed();
    let inputs = random_inputs(plan, seed);
    let t = std::time::Instant::now();
    let got = execute(plan, &inputs).map_err(|e| Failure::Input(format!("mercury-run: {e}")))?;
    let secs = t.elapsed().as_secs_f64();
    let ms = secs * 1e3;
    println!(
        "cpu: {} ranks, {} stages, {ms:.1} ms (seed {seed})",
        plan.num_ranks(),
        plan.num_stages()
    );
    if a.check {
        let reference = crate::reference_plan(c)?;
        let want = execute(&reference, &inputs)
            .map_err(|e| Failure::Input(format!("mercury-run: reference: {e}")))?;
        let tol = a.tolerance.unwrap_or(1e-9);
        let mut bad = Vec::new();
        for (name, e, nonfinite) in check::compare(&got, &want) {
            let ok = e <= tol;
            println!(
                "check @{name}: relative error {e:.3e} (tolerance {tol:.0e}){}{}",
                if nonfinite > 0 {
                    format!(", {nonfinite} non-finite values")
                } else {
                    String::new()
                },
                if ok { "  ok" } else { "  FAILED" }
            );
            if !ok {
                bad.push(name);
            }
        }
        if !bad.is_empty() {
            return Err(Failure::Check(format!(
                "mercury-run: check failed for {}",
                bad.join(", ")
            )));
        }
    }
    Ok(secs)
}
