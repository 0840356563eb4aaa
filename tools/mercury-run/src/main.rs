//! `mercury-run`: compiles a CommIR operator with a schedule (a `.sched` script, a pass
//! pipeline, or `--shift-shard`), lowers it to per-rank plans and runs them: on the CPU
//! reference executor (`--backend cpu`, f64, small shapes) or on the GPU (`--backend cuda`,
//! `--virtual` runs every rank on one GPU). `--check` compares the outputs with the operator's
//! single-device reference on fresh random inputs; `--bench` times both side by side.

use mercury_driver::Compiler;
use mercury_run::{args, compile, cpu, diag, Failure};
use std::process::ExitCode;

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

fn run(a: &args::Args) -> Result<(), Failure> {
    let compiler = Compiler::new();
    let c = compile(a, &compiler)?;
    let plan = mercury_driver::lower(&c.scheduled, Some(&c.kernel)).map_err(diag)?;
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
                mercury_run::gpu::run(a, &c, plan)
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
