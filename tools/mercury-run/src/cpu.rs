//! The CPU backend: the f64 reference executor on the scheduled plan and on the single-device
//! plan, with the same fresh random inputs. `--check` holds the plan to the single-device
//! plan in f64 (the data flow, `--tolerance`), then both stored in their dtypes
//! (`Storage::Dtype`: every value rounded where the plans store it, what a device holds)
//! within the GPU check's tolerance, saying how many elements the plan rounds otherwise.

use crate::{args::Args, check, Compiled, Failure};
use mercury_plan::Plan;
use mercury_runtime::cpu::{
    execute, execute_pieces, execute_with, random_inputs, rounded_otherwise_in, HeldPiece, Storage,
};
use std::collections::HashMap;

/// The largest relative error of the check in the plans' dtypes: the GPU check's default.
const STORED_TOLERANCE: f64 = 2e-2;

/// Runs the plan (and `--check`s it); returns the executor's time in seconds.
pub fn run(a: &Args, c: &Compiled, plan: &Plan) -> Result<f64, Failure> {
    fits(a, plan)?;
    let seed = a.seed();
    let mut inputs = random_inputs(plan, seed);
    if a.balance_documents {
        outln!(
            "{}",
            crate::balance::reorder(plan, &mut inputs).map_err(Failure::Input)?
        );
    }
    if !plan.documents.is_empty() {
        batch_balance(plan, &inputs);
    }
    let (held, secs) = timed(plan, &inputs, seed)?;
    if a.check {
        let reference = crate::reference_plan(a, c)?;
        let bad = check(a, c, plan, &held, &inputs, &reference, &inputs)?;
        if !bad.is_empty() {
            return Err(Failure::Check(format!(
                "check failed for {}",
                bad.join(", ")
            )));
        }
    }
    Ok(secs)
}

/// The attention work of this run's batch of documents (drawn with the inputs): how many
/// documents, the longest, and the busiest rank against the mean
/// (`mercury_conversion::report::attention_work_for`).
fn batch_balance(plan: &Plan, inputs: &HashMap<String, Vec<f64>>) {
    let Ok(docs) = mercury_runtime::cpu::documents(plan, inputs) else {
        return;
    };
    let work = mercury_conversion::report::attention_work_for(plan, Some(&docs));
    let (total, worst) = mercury_conversion::report::balance_of(&work);
    for (d, b) in plan.documents.iter().zip(&docs) {
        let longest = (0..b.len()).map(|i| b.range(i).len()).max().unwrap_or(0);
        outln!(
            "// documents @{}: {} in this batch, the longest {longest} of {} positions",
            d.name,
            b.len(),
            d.positions
        );
    }
    outln!(
        "//   attention work of this batch: busiest rank {total:.2}x the mean, {worst:.2}x in the worst stage"
    );
}

/// Refuses a plan too large for the CPU executor, or of another rank count than `--ranks`.
pub(crate) fn fits(a: &Args, plan: &Plan) -> Result<(), Failure> {
    mercury::cpu::check_size(plan)?;
    if let Some(n) = a.ranks {
        if n != plan.num_ranks() {
            return Err(Failure::Input(format!(
                "--ranks {n} but the mesh {:?} has {} ranks",
                plan.mesh,
                plan.num_ranks()
            )));
        }
    }
    Ok(())
}

/// Runs `plan` on `inputs` in f64 and prints the run's line; returns the pieces every rank
/// holds and the executor's time in seconds.
pub(crate) fn timed(
    plan: &Plan,
    inputs: &Inputs,
    seed: u64,
) -> Result<(Vec<HeldPiece>, f64), Failure> {
    let t = std::time::Instant::now();
    let held = execute_pieces(plan, inputs).map_err(|e| Failure::Input(e.to_string()))?;
    let secs = t.elapsed().as_secs_f64();
    let ms = secs * 1e3;
    outln!(
        "cpu: {} ranks, {} stages, {ms:.1} ms (seed {seed})",
        plan.num_ranks(),
        plan.num_stages()
    );
    Ok((held, secs))
}

/// Buffers by name, row-major f64.
pub(crate) type Inputs = HashMap<String, Vec<f64>>;

/// `--check` of one run: `plan` ran on `inputs` and its ranks hold `held`; `reference` (the
/// single-device plan) runs on `ref_inputs` (the same inputs, or for a training step's
/// backward the single-device forward's outputs). Each rank must hold exactly its declared
/// shard, every output must agree in f64 within `--tolerance`, and with every value stored in
/// its dtype within the GPU check's tolerance. Prints a line per check; returns the names of
/// the outputs that failed.
pub(crate) fn check(
    a: &Args,
    c: &Compiled,
    plan: &Plan,
    held: &[HeldPiece],
    inputs: &Inputs,
    reference: &Plan,
    ref_inputs: &Inputs,
) -> Result<Vec<String>, Failure> {
    let want =
        execute(reference, ref_inputs).map_err(|e| Failure::Input(format!("reference: {e}")))?;
    let tol = a.tolerance.unwrap_or(1e-9);
    let mut bad = Vec::new();
    // Each rank holds exactly its shard of every output as the input declares it.
    let declared = check::declared_outputs(&c.declared, plan.num_ranks())
        .map_err(|e| Failure::Check(format!("check failed: {e}")))?;
    let plan_shapes = plan
        .buffers
        .iter()
        .map(|b| (b.name.clone(), b.shape.clone()))
        .collect();
    let ranks = mercury_runtime::check::per_rank(&declared, &plan_shapes, held, &want)
        .map_err(|e| Failure::Check(format!("check failed: {e}")))?;
    for (name, rows) in group_by_buffer(&ranks) {
        let failed: Vec<&mercury_runtime::check::RankHolding> =
            rows.iter().copied().filter(|h| !h.ok(tol)).collect();
        let placement = c
            .declared
            .buffer(&name)
            .map(|b| mercury_passes::util::describe(&b.placement()))
            .unwrap_or_default();
        if failed.is_empty() {
            outln!("check @{name}: every rank holds its shard as declared ({placement})  ok");
            continue;
        }
        for h in &failed {
            outln!(
                "check @{name}: rank {} holds {} of the {} elements its declared placement ({placement}) gives it and {} outside it, relative error {:.3e}  FAILED",
                h.rank, h.held, h.declared, h.outside, h.error
            );
        }
        bad.push(format!("{name} (rank placement)"));
    }
    let got = mercury_runtime::cpu::assemble(plan, held);
    for c in check::compare(&got, &want, None) {
        let ok = c.within(tol);
        outln!(
            "check @{}: {}{}{}",
            c.name,
            c.describe(tol),
            if c.nonfinite > 0 {
                format!(", {} non-finite values", c.nonfinite)
            } else {
                String::new()
            },
            if ok { "  ok" } else { "  FAILED" }
        );
        if !ok {
            bad.push(c.name);
        }
    }
    // Both plans with every value stored in its dtype, as a device stores it: what the
    // GPU check compares (the f64 run cannot see where a plan rounds).
    let stored =
        execute_with(plan, inputs, Storage::Dtype).map_err(|e| Failure::Input(e.to_string()))?;
    let stored_want = execute_with(reference, ref_inputs, Storage::Dtype)
        .map_err(|e| Failure::Input(format!("reference: {e}")))?;
    for c in check::compare(&stored, &stored_want, None) {
        let ok = c.within(STORED_TOLERANCE);
        let apart = match stored.get(&c.name) {
            Some(x) => rounded_otherwise_in(x, stored_want.get(&c.name).map(Vec::as_slice)),
            None => 0,
        };
        outln!(
            "check @{} in its dtypes: {}, {apart} of {} elements rounded otherwise than the single-device plan{}",
            c.name,
            c.describe(STORED_TOLERANCE),
            c.elements,
            if ok { "  ok" } else { "  FAILED" }
        );
        if !ok {
            bad.push(format!("{} (in its dtypes)", c.name));
        }
    }
    Ok(bad)
}

/// The rank holdings of each output, by output name in order.
fn group_by_buffer(
    rows: &[mercury_runtime::check::RankHolding],
) -> Vec<(String, Vec<&mercury_runtime::check::RankHolding>)> {
    let mut out: Vec<(String, Vec<&mercury_runtime::check::RankHolding>)> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|(n, _)| *n == r.buffer) {
            Some((_, v)) => v.push(r),
            None => out.push((r.buffer.clone(), vec![r])),
        }
    }
    out
}
