//! What the schedule tests share: the examples scaled down, and a plan held to the
//! single-device plan on the CPU executor in f64 and stored in its dtypes.

#![allow(dead_code)]

use mercury_runtime::cpu::{
    execute_with, random_inputs, relative_error, round_to, rounded_otherwise, Storage,
};
use std::collections::HashMap;

/// The example with Llama-scale extents replaced by small ones that divide the same way.
pub fn scaled(text: &str) -> String {
    let mut t = text.to_string();
    for (a, b) in [
        (" min 128", ""),
        ("2097152", "64"),
        ("131072", "64"),
        ("32768", "32"),
        ("8192", "16"),
        ("4096", "16"),
        (", 128]", ", 4]"),
        ("@h = 32", "@h = 8"),
        ("@b = 16", "@b = 2"),
    ] {
        t = t.replace(a, b);
    }
    t
}

/// A schedule script scaled like [`scaled`]: striped blocks of 128 positions become 1.
pub fn scaled_schedule(text: &str) -> String {
    text.replace(";128)", ";1)")
}

/// The largest relative error of a run stored in `dtype` against another plan of the same
/// operator stored the same way: two units in the last place of the dtype (the bf16 casts of
/// finished values agree but for a few elements; a tile rounded elsewhere, a partial sum or a
/// softmax block, moves most elements by less than one unit).
pub fn stored_tolerance(dtype: mercury_plan::DType) -> f64 {
    use mercury_plan::DType;
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2f64.powi(-22),
        DType::F16 => 2f64.powi(-9),
        DType::BF16 => 2f64.powi(-7),
    }
}

/// Holds the outputs of `plan` run in its dtypes (`got`) to the single-device plan's run the
/// same way (`want`): stored in the output's dtype, within [`stored_tolerance`] of it, and,
/// unless `otherwise` names where the schedule rounds elsewhere, with at most one element in a
/// hundred rounded otherwise ([`rounded_otherwise`]); where it does, in more than that (the
/// executor sees it). `Err` says what does not hold.
pub fn rounding_agrees(
    case: &str,
    plan: &mercury_plan::Plan,
    got: &HashMap<String, Vec<f64>>,
    want: &HashMap<String, Vec<f64>>,
    otherwise: Option<&str>,
) -> Result<(), String> {
    rounding_agrees_by(case, plan, got, want, &|_| otherwise.map(str::to_string))
}

/// [`rounding_agrees`] with `otherwise` per output buffer (by name); a reason that starts with
/// `may ` allows either (rounded otherwise in any number of elements, or not).
pub fn rounding_agrees_by(
    case: &str,
    plan: &mercury_plan::Plan,
    got: &HashMap<String, Vec<f64>>,
    want: &HashMap<String, Vec<f64>>,
    otherwise: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    for b in plan
        .buffers
        .iter()
        .filter(|b| b.role == mercury_plan::Role::Output)
    {
        let one =
            |m: &HashMap<String, Vec<f64>>| HashMap::from([(b.name.clone(), m[&b.name].clone())]);
        let (g, w) = (one(got), one(want));
        if g[&b.name].iter().any(|x| round_to(b.dtype, *x) != *x) {
            return Err(format!(
                "{case}: @{} holds values that are not {}",
                b.name,
                b.dtype.name()
            ));
        }
        let e = relative_error(&g, &w);
        let tol = stored_tolerance(b.dtype);
        if e > tol {
            return Err(format!(
                "{case}: @{} relative error {e:.3e} (tolerance {tol:.1e})",
                b.name
            ));
        }
        let apart = rounded_otherwise(&g, &w);
        let total = w[&b.name].len();
        match otherwise(&b.name).as_deref() {
            None if apart * 100 > total => return Err(format!(
                "{case}: {apart} of the {total} elements of @{} are rounded otherwise than the single-device plan rounds them (relative error {e:.3e}): does the schedule round a tile that is not finished?",
                b.name
            )),
            Some(why) if apart * 100 <= total && !why.starts_with("may ") => return Err(format!(
                "{case}: only {apart} of the {total} elements of @{} are rounded otherwise, but the schedule rounds elsewhere ({why}): update rounds_otherwise",
                b.name
            )),
            _ => {}
        }
    }
    Ok(())
}

/// `plan` against the single-device plan `base` on the inputs of `seed`: the same values in
/// f64 (within 1e-12), and stored in the plans' dtypes as [`rounding_agrees`] holds them
/// (`otherwise`: where the schedule rounds elsewhere). `Err` says what does not hold.
pub fn computes(
    case: &str,
    plan: &mercury_plan::Plan,
    base: &mercury_plan::Plan,
    seed: u64,
    otherwise: Option<&str>,
) -> Result<(), String> {
    computes_by(case, plan, base, seed, &|_| otherwise.map(str::to_string))
}

/// [`computes`] with `otherwise` per output buffer (by name).
fn computes_by(
    case: &str,
    plan: &mercury_plan::Plan,
    base: &mercury_plan::Plan,
    seed: u64,
    otherwise: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let inputs = random_inputs(base, seed);
    let run = |p: &mercury_plan::Plan, storage| {
        execute_with(p, &inputs, storage).map_err(|e| format!("{case}: {e}"))
    };
    let e = relative_error(&run(plan, Storage::F64)?, &run(base, Storage::F64)?);
    if e >= 1e-12 {
        return Err(format!("{case}: relative error {e} in f64"));
    }
    let (got, want) = (run(plan, Storage::Dtype)?, run(base, Storage::Dtype)?);
    rounding_agrees_by(
        &format!("{case}, stored in its dtypes"),
        plan,
        &got,
        &want,
        otherwise,
    )
}

/// [`computes`] for an attention backward: a gradient the patch writes as bf16 block parts (the
/// GPU patch's own type, `lowering/conversion/src/compute.rs`), summed in f32 by the owner of
/// the tile, may be rounded otherwise than the single-device plan rounds it (whose one block
/// is rounded once; a schedule's several are rounded each); every other output as the plan's.
#[allow(dead_code)]
pub fn computes_bwd(
    case: &str,
    plan: &mercury_plan::Plan,
    base: &mercury_plan::Plan,
    seed: u64,
) -> Result<(), String> {
    // The patch's outputs dq, dk, dv (0, 1, 2) written in bf16: the ones a shift-reduce sends.
    let bf16_partials = |name: &str| {
        let Some(i) = ["dQ", "dK", "dV"].iter().position(|b| *b == name) else {
            return false;
        };
        plan.ranks.iter().any(|r| {
            r.slots.iter().any(|s| {
                s.dtype == mercury_plan::DType::BF16
                    && ["attention_bwd.out", "attention_bwd.blocks", "attention.out"]
                        .iter()
                        .any(|p| s.name.starts_with(&format!("{p}{i}.")))
            })
        })
    };
    computes_by(case, plan, base, seed, &|name| {
        bf16_partials(name).then(|| format!("may round otherwise: @{name}'s block parts are bf16"))
    })
}
