//! `mercury-run`: compiles a CommIR operator with a schedule (a `.sched` script, a pass
//! pipeline, or `--shift-shard`), lowers it to per-rank plans and runs them: on the CPU
//! reference executor (`--backend cpu`, f64, small shapes) or on the GPU (`--backend cuda`,
//! `--virtual` runs every rank on one GPU). `--check` compares the outputs with the operator's
//! single-device reference on fresh random inputs; `--bench` times both side by side.

mod args;
mod check;
mod cpu;
#[cfg(feature = "cuda")]
mod gpu;

use mercury_driver::{Compiler, Schedule, ScheduleError};
use mercury_ir::{Diagnostic, Operation};
use std::process::ExitCode;

/// What went wrong, with the exit status it maps to.
pub enum Failure {
    /// Bad input or arguments (exit 1).
    Input(String),
    /// A numerics check failed (exit 1).
    Check(String),
    /// No usable GPU or library (exit 2).
    NoDevice(String),
}

fn main() -> ExitCode {
    init_logging();
    let args = match args::parse() {
        Ok(a) => a,
        Err(e) => {
            // clap prints help and version itself and exits 0 for them.
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(m)) | Err(Failure::Check(m)) => {
            eprint!("{m}");
            if !m.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(1)
        }
        Err(Failure::NoDevice(m)) => {
            eprintln!("mercury-run: {m}");
            ExitCode::from(2)
        }
    }
}

/// Library warnings (`tracing`: the CUDA executor's) go to stderr: `warn` and above, or the
/// level named in `RUST_LOG` (`error`, `warn`, `info`, `debug`, `trace`).
fn init_logging() {
    let level = std::env::var("RUST_LOG").ok().and_then(|l| l.parse().ok());
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .without_time();
    fmt.with_max_level(level.unwrap_or(tracing::Level::WARN))
        .init();
}

/// The module, scheduled and verified, and the unscheduled reference module.
pub struct Compiled {
    pub scheduled: Operation,
    pub reference: Operation,
    pub kernel: String,
    /// The kernel as the input declares it (before scheduling): its outputs' placements are
    /// what `--check` holds each rank to.
    pub declared: mercury_commir::Kernel,
}

fn diag(d: Diagnostic) -> Failure {
    Failure::Input(d.render())
}

/// Parses, verifies and schedules the input (the compile path, `mercury_driver`).
pub fn compile(a: &args::Args, compiler: &Compiler) -> Result<Compiled, Failure> {
    let text = std::fs::read_to_string(&a.input).map_err(|e| {
        Failure::Input(format!(
            "mercury-run: cannot read '{}': {e}",
            a.input.display()
        ))
    })?;
    let module = compiler
        .parse(&a.input.display().to_string(), &text)
        .map_err(diag)?;
    let kernels = mercury_commir::kernels(&module).map_err(diag)?;
    let kernel = match &a.kernel {
        Some(k) => kernels
            .iter()
            .find(|x| x.name == k.trim_start_matches('@'))
            .map(|x| x.name.clone())
            .ok_or_else(|| Failure::Input(format!("mercury-run: no kernel '@{k}' in the input")))?,
        None => match kernels.as_slice() {
            [k] => k.name.clone(),
            [] => {
                return Err(Failure::Input(
                    "mercury-run: the input has no commir.kernel".into(),
                ))
            }
            _ => {
                return Err(Failure::Input(
                    "mercury-run: the input has several kernels; choose one with --kernel".into(),
                ))
            }
        },
    };
    let script = match &a.schedule {
        Some(s) => Some(std::fs::read_to_string(s).map_err(|e| {
            Failure::Input(format!(
                "mercury-run: cannot read schedule '{}': {e}",
                s.display()
            ))
        })?),
        None => None,
    };
    let schedule = Schedule {
        shift_shard: a.shift_shard,
        script,
        script_name: a.schedule.as_ref().map(|s| s.display().to_string()),
        pipeline: a.pass_pipeline.clone(),
    };
    let mut pm = compiler.pass_manager(&schedule).map_err(|e| match e {
        ScheduleError::ShiftShard(m) => Failure::Input(format!("mercury-run: {m}")),
        ScheduleError::Script(d) | ScheduleError::Pipeline(d) => diag(d),
    })?;
    let mut scheduled = module.clone();
    pm.run(&mut scheduled, &compiler.registry).map_err(diag)?;
    let declared = kernels
        .into_iter()
        .find(|k| k.name == kernel)
        .expect("the kernel was chosen from this list");
    Ok(Compiled {
        scheduled,
        reference: single_device(&module),
        kernel,
        declared,
    })
}

/// The operator on one device (the `single-device` pass): its plan is the single-device patch
/// the schedules are checked and timed against.
pub fn single_device(module: &Operation) -> Operation {
    let mut m = module.clone();
    mercury_passes::mesh::single_device(&mut m);
    m
}

/// The single-device plan of the operator (the reference of `--check` and `--bench`).
pub fn reference_plan(c: &Compiled) -> Result<mercury_plan::Plan, Failure> {
    mercury_driver::lower(&c.reference, Some(&c.kernel)).map_err(|d| {
        Failure::Input(format!(
            "{}mercury-run: the single-device reference needs the local (unscheduled) operator as input, with the schedule given by --schedule, --shift-shard or --pass-pipeline",
            d.render()
        ))
    })
}

fn run(a: &args::Args) -> Result<(), Failure> {
    let compiler = Compiler::new();
    let c = compile(a, &compiler)?;
    let plan = mercury_driver::lower(&c.scheduled, Some(&c.kernel)).map_err(diag)?;
    // What the run will be checked or timed against must exist before anything runs.
    if a.check || a.bench {
        reference_plan(&c)?;
    }
    if let Some(path) = &a.emit_plan {
        std::fs::write(path, plan.to_json()).map_err(|e| {
            Failure::Input(format!(
                "mercury-run: cannot write '{}': {e}",
                path.display()
            ))
        })?;
    }
    println!(
        "{}",
        mercury_conversion::report::comm_plan(&plan, false).trim_end()
    );
    if let Some(balance) = mercury_conversion::report::causal_balance(&plan) {
        println!("{}", balance.trim_end());
    }
    println!(
        "{}",
        mercury_conversion::report::memory(&plan)
            .lines()
            .next()
            .unwrap_or("")
    );
    match a.backend {
        args::Backend::Cpu => cpu::run(a, &c, &plan),
        args::Backend::Cuda => {
            #[cfg(feature = "cuda")]
            {
                gpu::run(a, &c, plan)
            }
            #[cfg(not(feature = "cuda"))]
            {
                Err(Failure::NoDevice(
                    "this build has no CUDA backend (rebuild with --features cuda)".into(),
                ))
            }
        }
    }
}
