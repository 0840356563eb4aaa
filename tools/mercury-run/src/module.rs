//! A module of several kernels run as one program (`--module`): every kernel of the input in
//! module order on the CPU executor, joined by the buffers between them. An input of a kernel
//! that an earlier kernel writes is that kernel's output (an *edge*); where the writer leaves
//! it in another placement than the reader declares, the `reshard-edges` pass re-declares it
//! and reshards it at the reader's start, so the reshard is part of the reader's plan and runs
//! as any reshard does. The other inputs (the module's input, its weights) are fresh random
//! values shared by every kernel that reads them. `--schedule` is one script for the module:
//! a pass with its own `kernel=` option transforms that kernel, one without transforms every
//! kernel. `--check` holds every kernel's outputs to the single-device module (each kernel's
//! single-device plan run on the single-device outputs of the kernels before it), in f64.

use crate::args::Args;
use crate::cpu::{check, fits, timed, Inputs};
use crate::{diag, reference_plan, Compiled, Failure};
use mercury_commir::Role;
use mercury_driver::{Compiler, Schedule};
use mercury_plan::Plan;
use mercury_runtime::cpu::{assemble, execute, random_inputs};

/// One kernel of the module, compiled and lowered.
struct Step {
    args: Args,
    compiled: Compiled,
    plan: Plan,
}

/// Runs the module `a` asks for (`--module`).
pub fn run(a: &Args) -> Result<(), Failure> {
    let compiler = Compiler::new();
    let text = std::fs::read_to_string(&a.input)
        .map_err(|e| Failure::Input(format!("cannot read '{}': {e}", a.input.display())))?;
    let module = compiler
        .parse(&a.input.display().to_string(), &text)
        .map_err(diag)?;
    let script = crate::read_schedule(a)?;
    // The schedule on every kernel (no default kernel), then every kernel's edges: a schedule
    // may re-declare an input, and the edge reshards to the placement the kernel finally
    // reads it in.
    let mut scheduled = module.clone();
    let schedule = Schedule {
        shift_shard: None,
        script,
        script_name: a.schedule.as_ref().map(|s| s.display().to_string()),
        pipeline: None,
        kernel: None,
    };
    compiler.schedule(&mut scheduled, &schedule).map_err(diag)?;
    let before_edges = mercury_commir::kernels(&scheduled).map_err(diag)?;
    let edges = Schedule {
        shift_shard: None,
        script: None,
        script_name: None,
        pipeline: Some("builtin.module(reshard-edges)".into()),
        kernel: None,
    };
    compiler.schedule(&mut scheduled, &edges).map_err(diag)?;
    let reference = mercury::single_device(&module);
    let now = mercury_commir::kernels(&scheduled).map_err(diag)?;
    // Where each output ends: as the module declares it, or as a `place-edge` pass of the
    // schedule places an edge.
    let kernels = mercury_commir::kernels(&mercury::compile::placed_edges(
        &compiler, &module, &schedule,
    )?)
    .map_err(diag)?;
    let mut steps = Vec::with_capacity(kernels.len());
    for k in &kernels {
        if let Some(s) = now.iter().find(|x| x.name == k.name) {
            if s.mesh.shape != k.mesh.shape {
                return Err(diag(mercury_ir::Diagnostic::error(
                    s.loc.clone(),
                    format!(
                        "--module: the schedule re-shapes the mesh of '@{}' from {:?} to {:?}; a module's kernels share their mesh",
                        k.name, k.mesh.shape, s.mesh.shape
                    ),
                )));
            }
        }
        let mut ka = a.clone();
        ka.kernel = Some(k.name.clone());
        let compiled = Compiled {
            scheduled: scheduled.clone(),
            reference: reference.clone(),
            kernel: k.name.clone(),
            declared: k.clone(),
            notes: Vec::new(),
        };
        let plan = mercury_driver::lower(&scheduled, Some(&k.name)).map_err(diag)?;
        if a.check {
            // Refused now, before anything runs, where the reference cannot be had.
            reference_plan(&ka, &compiled)?;
        }
        steps.push(Step {
            args: ka,
            compiled,
            plan,
        });
    }
    let mut written: Vec<(&str, &str)> = Vec::new();
    for (s, k) in steps.iter().zip(&kernels) {
        outln!("kernel @{}:", k.name);
        // The reader's placement as its schedule left it, the writer's as declared (an
        // output's declared placement is where it ends).
        let reader = before_edges.iter().find(|x| x.name == k.name).unwrap_or(k);
        for b in reader.buffers.iter().filter(|b| b.role == Role::In) {
            let Some((_, from)) = written.iter().rev().find(|(n, _)| *n == b.name) else {
                continue;
            };
            let src = kernels
                .iter()
                .find(|x| x.name == *from)
                .and_then(|x| x.buffer(&b.name))
                .map(|x| x.placement());
            let Some(src) = src else { continue };
            let dst = b.placement();
            use mercury_passes::util::describe;
            if src == dst {
                outln!(
                    "edge @{}: from @{from}, placed alike ({}): nothing moves",
                    b.name,
                    describe(&dst)
                );
            } else {
                outln!(
                    "edge @{}: from @{from} in {}, read in {}: resharded at the start of @{}",
                    b.name,
                    describe(&src),
                    describe(&dst),
                    k.name
                );
            }
        }
        outln!(
            "{}",
            mercury_conversion::report::comm_plan(&s.plan, false).trim_end()
        );
        outln!(
            "{}",
            mercury_conversion::report::memory(&s.plan)
                .lines()
                .next()
                .unwrap_or("")
        );
        for b in k
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        {
            written.push((b.name.as_str(), k.name.as_str()));
        }
    }
    if a.no_run {
        return Ok(());
    }
    for s in &steps {
        fits(a, &s.plan)?;
    }
    let seed = a.seed();
    // Every buffer's current value (full, row-major): the module's inputs as first drawn, the
    // outputs as last written; and the same for the single-device module.
    let mut values = Inputs::new();
    let mut ref_values = Inputs::new();
    let mut bad = Vec::new();
    for (n, s) in steps.iter().enumerate() {
        let mut inputs = random_inputs(&s.plan, seed.wrapping_add(n as u64));
        for (name, v) in inputs.iter_mut() {
            match values.get(name) {
                Some(x) => *v = x.clone(),
                None => {
                    values.insert(name.clone(), v.clone());
                    ref_values.insert(name.clone(), v.clone());
                }
            }
        }
        let (held, _) = timed(&s.plan, &inputs, seed)?;
        let out = assemble(&s.plan, &held);
        if a.check {
            let reference = reference_plan(&s.args, &s.compiled)?;
            let ref_inputs: Inputs = inputs
                .keys()
                .map(|name| (name.clone(), ref_values[name].clone()))
                .collect();
            outln!("check of @{}:", s.compiled.kernel);
            bad.extend(check(
                &s.args,
                &s.compiled,
                &s.plan,
                &held,
                &inputs,
                &reference,
                &ref_inputs,
            )?);
            let ref_out = execute(&reference, &ref_inputs)
                .map_err(|e| Failure::Input(format!("reference: {e}")))?;
            ref_values.extend(ref_out);
        }
        values.extend(out);
    }
    if !bad.is_empty() {
        return Err(Failure::Check(format!(
            "check failed for {}",
            bad.join(", ")
        )));
    }
    Ok(())
}
