//! A training step (`--backward NAME`): the forward kernel and its backward, one after the
//! other on the CPU executor, or on the GPU (`--backend cuda`: each kernel through
//! [`crate::gpu::checked_bench_on`], the backward on the forward's outputs brought back to the
//! host). The backward reads the forward's inputs and outputs by name
//! (Q, K, V; O and the log-sum-exp the forward keeps with `lse @LSE`) where the forward left
//! them: each such buffer must be declared alike in both kernels (shape, element type,
//! placement), so that on devices nothing would move between the two. Its other inputs (the
//! loss's gradient dO) are fresh random inputs. `--check` holds both kernels' outputs to the
//! single-device step: the single-device forward, then the single-device backward on its
//! outputs.

use crate::args::Args;
use crate::cpu::{check, fits, timed, Inputs};
use crate::{compile, diag, reference_plan, Failure};
use mercury_commir::{Kernel, Role};
use mercury_driver::Compiler;
use mercury_ir::Diagnostic;
use mercury_plan::Plan;
use mercury_runtime::cpu::{assemble, execute, random_inputs};

/// Where a backward input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// The forward's input of that name: the same values.
    ForwardInput,
    /// The forward's output of that name.
    ForwardOutput,
    /// A fresh random input (the loss's gradient).
    Fresh,
}

/// Runs the training step `a` asks for (`--backward`).
pub fn run(a: &Args) -> Result<(), Failure> {
    let compiler = Compiler::new();
    let (fwd, bwd) = kernel_pair(a, &compiler)?;
    let mut fa = a.clone();
    fa.kernel = Some(fwd);
    let mut ba = a.clone();
    ba.kernel = Some(bwd);
    if let Some(s) = &a.backward_schedule {
        ba.schedule = Some(s.clone());
        ba.shift_shard = None;
        ba.pass_pipeline = None;
    }
    let fc = compile(&fa, &compiler).map_err(|e| both_kernels_note(a, e, &fa))?;
    let bc = compile(&ba, &compiler).map_err(|e| both_kernels_note(a, e, &ba))?;
    let sources = handoff(&fc.declared, &bc.declared)?;
    let fplan = mercury_driver::lower(&fc.scheduled, Some(&fc.kernel)).map_err(diag)?;
    let bplan = mercury_driver::lower(&bc.scheduled, Some(&bc.kernel)).map_err(diag)?;
    if a.check {
        reference_plan(&fa, &fc)?;
        reference_plan(&ba, &bc)?;
    }
    for (what, c, plan) in [("forward", &fc, &fplan), ("backward", &bc, &bplan)] {
        outln!("{what} @{}:", c.kernel);
        outln!(
            "{}",
            mercury_conversion::report::comm_plan(plan, false).trim_end()
        );
        outln!(
            "{}",
            mercury_conversion::report::memory(plan)
                .lines()
                .next()
                .unwrap_or("")
        );
    }
    let kept: Vec<String> = sources
        .iter()
        .filter(|(_, s)| *s == Source::ForwardOutput)
        .map(|(n, _)| format!("@{n}"))
        .collect();
    outln!(
        "step: the backward reads {} where the forward leaves {} (placements declared alike: nothing moves between the kernels)",
        kept.join(", "),
        if kept.len() == 1 { "it" } else { "them" }
    );
    if a.no_run {
        return Ok(());
    }
    #[cfg(feature = "cuda")]
    if a.backend == crate::args::Backend::Cuda {
        return cuda::run(a, (&fa, &fc, fplan), (&ba, &bc, bplan), &sources);
    }
    fits(a, &fplan)?;
    fits(a, &bplan)?;
    let seed = a.seed();
    let f_inputs = random_inputs(&fplan, seed);
    let (f_held, _) = timed(&fplan, &f_inputs, seed)?;
    let f_out = assemble(&fplan, &f_held);
    let b_inputs = backward_inputs(&bplan, &sources, &f_inputs, &f_out, seed);
    let (b_held, _) = timed(&bplan, &b_inputs, seed)?;
    if !a.check {
        return Ok(());
    }
    let fref = reference_plan(&fa, &fc)?;
    let bref = reference_plan(&ba, &bc)?;
    outln!("check of the forward @{}:", fc.kernel);
    let mut bad = check(&fa, &fc, &fplan, &f_held, &f_inputs, &fref, &f_inputs)?;
    // The single-device step: its backward reads the single-device forward's outputs.
    let ref_out =
        execute(&fref, &f_inputs).map_err(|e| Failure::Input(format!("reference: {e}")))?;
    let ref_inputs = backward_inputs(&bref, &sources, &f_inputs, &ref_out, seed);
    outln!("check of the backward @{}:", bc.kernel);
    bad.extend(check(
        &ba,
        &bc,
        &bplan,
        &b_held,
        &b_inputs,
        &bref,
        &ref_inputs,
    )?);
    if !bad.is_empty() {
        return Err(Failure::Check(format!(
            "check failed for {}",
            bad.join(", ")
        )));
    }
    Ok(())
}

/// `e` (a failure to schedule kernel `k.kernel`) with a note when `--schedule` scheduled both
/// kernels of the step: a backward script (`ring_attention_bwd.sched`) names buffers the
/// forward does not have, and the forward's script the backward's, so the message says how
/// to give each kernel its own.
fn both_kernels_note(a: &Args, e: Failure, k: &Args) -> Failure {
    match (e, &a.schedule, &a.backward_schedule) {
        (Failure::Located(m), Some(s), None) => Failure::Located(format!(
            "{}\nnote: --schedule '{}' schedules both kernels of the training step (here @{}); give the backward its own script with --backward-schedule (e.g. --schedule ring_attention.sched --backward-schedule ring_attention_bwd.sched)\n",
            m.trim_end(),
            s.display(),
            k.kernel.as_deref().unwrap_or_default()
        )),
        (e, _, _) => e,
    }
}

/// The forward's and the backward's kernel names: `--kernel` (or the input's only other
/// kernel) and `--backward`.
fn kernel_pair(a: &Args, compiler: &Compiler) -> Result<(String, String), Failure> {
    let kernels = crate::input_kernels(a, compiler)?;
    let names = || mercury_commir::kernel_names(&kernels);
    let bwd = a
        .backward
        .as_deref()
        .unwrap_or_default()
        .trim_start_matches('@')
        .to_string();
    if !kernels.iter().any(|k| k.name == bwd) {
        return Err(Failure::Input(format!(
            "--backward: no kernel '@{bwd}' in the input (it has {})",
            names()
        )));
    }
    let fwd = match &a.kernel {
        Some(k) => k.trim_start_matches('@').to_string(),
        None => {
            let others: Vec<&Kernel> = kernels.iter().filter(|k| k.name != bwd).collect();
            match others.as_slice() {
                [k] => k.name.clone(),
                [] => {
                    return Err(Failure::Input(format!(
                        "--backward '@{bwd}' needs its forward, another kernel of the input (it has {})",
                        names()
                    )))
                }
                _ => {
                    return Err(Failure::Input(format!(
                        "the input has several kernels ({}); name the forward with --kernel NAME",
                        names()
                    )))
                }
            }
        }
    };
    if fwd == bwd {
        return Err(Failure::Input(format!(
            "--kernel and --backward both name '@{fwd}': a training step runs a forward and another kernel, its backward"
        )));
    }
    Ok((fwd, bwd))
}

/// Where each input of the backward `b` comes from, checked against the forward `f`: a buffer
/// of the same name must be an input or an output of the forward, of the same shape, element
/// type and placement (the forward leaves it where the backward reads it), and at least one
/// must be a forward output (else the two kernels are no step). Refusals are located at the
/// backward's declaration, with a note at the forward's.
fn handoff(f: &Kernel, b: &Kernel) -> Result<Vec<(String, Source)>, Failure> {
    let mut out = Vec::new();
    for bb in b.buffers.iter().filter(|x| x.role == Role::In) {
        let Some(fb) = f.buffer(&bb.name) else {
            out.push((bb.name.clone(), Source::Fresh));
            continue;
        };
        let refuse = |why: String| {
            diag(Diagnostic::error(bb.loc.clone(), why).with_note(
                fb.loc.clone(),
                format!("'@{}' of the forward '@{}'", fb.name, f.name),
            ))
        };
        let source = match fb.role {
            Role::In => Source::ForwardInput,
            Role::Out => Source::ForwardOutput,
            r => {
                return Err(refuse(format!(
                    "the backward reads '@{}', which the forward '@{}' holds as '{}': a step passes the forward's inputs and outputs",
                    bb.name,
                    f.name,
                    r.keyword()
                )))
            }
        };
        let (fs, bs) = (f.shape(fb), b.shape(bb));
        if fs != bs || fb.dtype != bb.dtype {
            return Err(refuse(format!(
                "'@{}' is {bs:?} {} here and {fs:?} {} in the forward '@{}'",
                bb.name, bb.dtype, fb.dtype, f.name
            )));
        }
        let (fp, bp) = (fb.placement(), bb.placement());
        if fp != bp {
            use mercury_passes::util::describe;
            return Err(refuse(format!(
                "the backward reads '@{}' in {} but the forward '@{}' leaves it in {}: declare them alike, so that nothing moves between the kernels",
                bb.name,
                describe(&bp),
                f.name,
                describe(&fp)
            )));
        }
        out.push((bb.name.clone(), source));
    }
    if !out.iter().any(|(_, s)| *s == Source::ForwardOutput) {
        return Err(diag(Diagnostic::error(
            b.loc.clone(),
            format!(
                "no input of the backward '@{}' is an output of the forward '@{}' (a backward reads the forward's output and log-sum-exp under their names)",
                b.name, f.name
            ),
        )));
    }
    Ok(out)
}

/// The backward's inputs: the forward's inputs and outputs where `sources` says so, fresh
/// random values (stream of `seed + 1`) for the rest.
fn backward_inputs(
    plan: &Plan,
    sources: &[(String, Source)],
    f_inputs: &Inputs,
    f_out: &Inputs,
    seed: u64,
) -> Inputs {
    let mut fresh = random_inputs(plan, seed.wrapping_add(1));
    fresh
        .iter_mut()
        .filter_map(|(name, v)| {
            let (_, s) = sources.iter().find(|(n, _)| n == name)?;
            let from = match s {
                Source::ForwardInput => f_inputs.get(name)?,
                Source::ForwardOutput => f_out.get(name)?,
                Source::Fresh => return None,
            };
            *v = from.clone();
            Some(())
        })
        .for_each(drop);
    fresh
}

/// The step on the GPU: the forward through [`crate::gpu::checked_bench_on`] on fresh inputs,
/// then the backward on the forward's inputs and outputs (by name, as [`handoff`] found them)
/// and a fresh dO. With `--check`, each kernel is held to its single-device plan on the same
/// inputs (the backward's reference reads the scheduled forward's outputs, so the two
/// backwards see identical values) and to f64 rows.
#[cfg(feature = "cuda")]
mod cuda {
    use super::Source;
    use crate::args::Args;
    use crate::gpu::{checked_bench_on, locate_attention_refusal, start_watchdog};
    use crate::{reference_plan, Compiled, Failure};
    use mercury_plan::Plan;
    use mercury_runtime::cuda::HostBuffer;

    pub(super) fn run(
        a: &Args,
        (fa, fc, fplan): (&Args, &Compiled, Plan),
        (ba, bc, bplan): (&Args, &Compiled, Plan),
        sources: &[(String, Source)],
    ) -> Result<(), Failure> {
        start_watchdog(a)?;
        let seed = a.seed();
        let f_inputs = HostBuffer::random_inputs(&fplan, seed);
        outln!("forward @{} on the GPU:", fc.kernel);
        let f = checked_bench_on(
            fa,
            fplan,
            || reference_plan(fa, fc),
            Some(f_inputs.clone()),
            &mut |l| outln!("{l}"),
        )
        .map_err(|e| locate_attention_refusal(fc, e))?;
        let mut b_inputs = HostBuffer::random_inputs(&bplan, seed.wrapping_add(1));
        for (name, v) in b_inputs.iter_mut() {
            let from = match sources.iter().find(|(n, _)| n == name).map(|(_, s)| s) {
                Some(Source::ForwardInput) => f_inputs.get(name),
                Some(Source::ForwardOutput) => f.outputs.get(name),
                _ => None,
            };
            if let Some(from) = from {
                *v = from.clone();
            }
        }
        outln!("backward @{} on the GPU:", bc.kernel);
        checked_bench_on(
            ba,
            bplan,
            || reference_plan(ba, bc),
            Some(b_inputs),
            &mut |l| outln!("{l}"),
        )
        .map_err(|e| locate_attention_refusal(bc, e))?;
        Ok(())
    }
}
