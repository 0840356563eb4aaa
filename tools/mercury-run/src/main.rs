//! `mercury-run`: compiles a CommIR operator with a schedule (a `.sched` script, a pass
//! pipeline, or `--shift-shard`), lowers it to per-rank plans and runs them: on the CPU
//! reference executor (`--backend cpu`, small shapes: f64, and for `--check` also with every
//! value stored in its dtype) or on the GPU (`--backend cuda`, `--virtual` runs every rank on
//! one GPU). `--check` compares the outputs with the operator's single-device reference on
//! fresh random inputs; `--bench` times both side by side.

use mercury_driver::Compiler;
use mercury_run::{args, compile, cpu, diag, outln, Failure};
use std::process::ExitCode;

fn main() -> ExitCode {
    init_logging();
    let args = match args::parse() {
        Ok(a) => a,
        // Help and version exit 0, usage errors 1.
        Err(e) => return mercury_driver::cli::clap_failure(&e),
    };
    match run(&args).and_then(|()| match mercury_run::stdout_failure() {
        Some(e) => Err(Failure::Input(format!(
            "could not write standard output: {e}"
        ))),
        None => Ok(()),
    }) {
        Ok(()) => ExitCode::SUCCESS,
        // The one place errors are printed: `file:line:col: error: ...` or
        // `mercury-run: error: ...` (`Failure::render`).
        Err(f) => {
            eprint!("{}", f.render(mercury_run::TOOL));
            ExitCode::from(f.exit_status())
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
    if a.backward.is_some() {
        return mercury_run::train::run(a);
    }
    if a.module {
        return mercury_run::module::run(a);
    }
    let compiler = Compiler::new();
    let c = compile(a, &compiler)?;
    let plan = mercury_driver::lower(&c.scheduled, Some(&c.kernel)).map_err(diag)?;
    // What the run will be checked or timed against must exist before anything runs.
    if a.check || a.bench {
        mercury_run::reference_plan(a, &c)?;
    }
    if let Some(path) = &a.emit_plan {
        std::fs::write(path, plan.to_json())
            .map_err(|e| Failure::Input(format!("cannot write '{}': {e}", path.display())))?;
    }
    outln!(
        "{}",
        mercury_conversion::report::comm_plan(&plan, false).trim_end()
    );
    if let Some(balance) = mercury_conversion::report::causal_balance(&plan) {
        outln!("{}", balance.trim_end());
    }
    outln!(
        "{}",
        mercury_conversion::report::memory(&plan)
            .lines()
            .next()
            .unwrap_or("")
    );
    // --predict: the model's figure first, so that it stands even when the run fails. A plan
    // the model cannot price is an error only when the prediction is all that was asked for.
    let predicted = match &a.predict {
        Some(t) => match predict(&plan, t, a.predict_trace.as_deref())? {
            Ok(p) => Some(p),
            Err(m) if !a.no_run => {
                outln!("model: {m}; running without a prediction");
                None
            }
            Err(m) => return Err(Failure::Input(format!("--predict {t}: {m}"))),
        },
        None => None,
    };
    if a.no_run {
        if let Some(r) = a.ranks.filter(|r| *r != plan.num_ranks()) {
            return Err(Failure::Input(format!(
                "--ranks {r} but the mesh {:?} has {} ranks",
                plan.mesh,
                plan.num_ranks()
            )));
        }
        return Ok(());
    }
    // --cache-file: the entry must hold this very schedule, measured on this run's device.
    let device = match &a.cache_file {
        Some(_) => Some(run_device(a)?),
        None => None,
    };
    if let (Some(path), Some(device)) = (&a.cache_file, &device) {
        if a.backend == args::Backend::Cuda && !a.bench {
            return Err(Failure::Input(
                "--cache-file compares a timed run: give --bench".into(),
            ));
        }
        let entry = mercury_search::cache::read_entry(path).map_err(|l| {
            Failure::Input(format!(
                "--cache-file {}: not a usable schedule cache entry: {l}",
                path.display()
            ))
        })?;
        if entry.chosen.plan != plan {
            return Err(Failure::Input(format!(
                "--cache-file {}: its schedule '{}' is not the one compiled here (give the input and its schedule.transform)",
                path.display(),
                entry.chosen.name
            )));
        }
        mercury_search::cache::comparable(&entry, device)
            .map_err(|e| Failure::Input(format!("--cache-file {}: {e}", path.display())))?;
        if let Some(why) = &entry.suspect {
            outln!("cache: the entry is already suspect: {why}");
        }
    }
    let secs = match a.backend {
        args::Backend::Cpu => Some(cpu::run(a, &c, &plan)?),
        args::Backend::Cuda => {
            #[cfg(feature = "cuda")]
            {
                mercury_run::gpu::run(a, &c, plan)?
            }
            #[cfg(not(feature = "cuda"))]
            {
                return Err(Failure::NoDevice(
                    "this build has no CUDA backend (rebuild with --features cuda)".into(),
                ));
            }
        }
    };
    if let (Some((p, topo)), Some(now), args::Backend::Cuda) = (&predicted, secs, a.backend) {
        outln!(
            "model vs measured: predicted {:.3} ms, measured {:.3} ms ({}): error {:+.1}%",
            p * 1e3,
            now * 1e3,
            topo,
            (p / now - 1.0) * 100.0
        );
    }
    if let (Some(path), Some(now), Some(device)) = (&a.cache_file, secs, &device) {
        match mercury_search::cache::check_run_against(path, now, device) {
            Ok(Some(why)) => outln!(
                "cache: schedule is SUSPECT ({why}); marked in {}: re-tune (mercury-tune --profile-top), or fall back to the model's pick",
                path.display()
            ),
            Ok(None) => outln!(
                "cache: within 20% of the cached measured time (or none cached) in {}",
                path.display()
            ),
            Err(e) => {
                return Err(Failure::Input(format!(
                    "--cache-file: {e}"
                )))
            }
        }
    }
    Ok(())
}

/// The device a run's times are measured on, as a cache entry's `key.device` names it: the
/// CPU reference executor, or the name of GPU 0.
fn run_device(a: &args::Args) -> Result<String, Failure> {
    match a.backend {
        args::Backend::Cpu => Ok(mercury_search::cache::CPU_DEVICE.to_string()),
        args::Backend::Cuda => {
            #[cfg(feature = "cuda")]
            {
                mercury_run::gpu::device_name(0)
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

/// `--predict`: the cost model's latency of `plan` (seconds) on the topology named by `spec`
/// (a preset or a TOML file, `mercury_search::Topology::load`), printed as
/// `model: predicted X ms on topology 'NAME' (N devices)`, with the number used when the plan
/// has fewer ranks (rank r on device r); also returns the topology's name.
///
/// # Errors
/// `Err`: an unreadable or invalid topology, or one with fewer devices than the plan has ranks
/// (bad input). `Ok(Err(reason))`: a plan the model does not price (views of shapes its
/// compute model does not know, say): "the cost model cannot price this plan: ...", or one
/// whose peak memory per rank exceeds the devices' usable HBM ("the plan does not fit").
/// With `trace`, the model's timeline is written there (`Simulation::chrome_trace`); a file
/// that cannot be written is an error.
fn predict(
    plan: &mercury_plan::Plan,
    spec: &str,
    trace: Option<&std::path::Path>,
) -> Result<Result<(f64, String), String>, Failure> {
    let bad = |m: String| Failure::Input(format!("--predict {spec}: {m}"));
    let topo = mercury_search::Topology::load(spec).map_err(|e| match e {
        // A located error in the file, as it stands.
        mercury_search::topology::TopologyError::Located(d) => Failure::Located(d.render()),
        e => bad(e.to_string()),
    })?;
    // A plan the topology's devices cannot hold would not run there: no time for it (the
    // search marks such candidates over memory the same way).
    let mem = mercury_search::memory::memory_report(plan, &topo);
    if !mem.fits {
        return Ok(Err(format!(
            "the plan does not fit topology '{}': rank {} needs {} of {} usable per device",
            topo.name,
            mem.peak_rank,
            mercury_search::memory::gb(mem.peak_bytes),
            mercury_search::memory::gb(mem.usable_bytes)
        )));
    }
    let opts = mercury_search::sim::SimOptions {
        trace: trace.is_some(),
    };
    let sim = match mercury_search::sim::simulate(plan, &topo, opts) {
        Ok(s) => s,
        Err(e @ mercury_search::sim::SimError::TooManyRanks { .. }) => {
            return Err(bad(format!("the topology does not fit the plan: {e}")))
        }
        Err(e) => return Ok(Err(format!("the cost model cannot price this plan: {e}"))),
    };
    if !sim.latency.is_finite() {
        return Ok(Err(format!(
            "the cost model cannot price this plan: its predicted time is not finite ({})",
            sim.latency
        )));
    }
    let used = if plan.num_ranks() < topo.num_devices() {
        format!(", the plan uses {}", plan.num_ranks())
    } else {
        String::new()
    };
    outln!(
        "model: predicted {:.3} ms on topology '{}' ({} devices{used})",
        sim.latency * 1e3,
        topo.name,
        topo.num_devices()
    );
    if let Some(path) = trace {
        let title = format!("{} on {}", plan.name, topo.name);
        let json = sim.chrome_trace(&title, plan.num_ranks());
        std::fs::write(path, json.to_string())
            .map_err(|e| Failure::Input(format!("--predict-trace {}: {e}", path.display())))?;
        outln!("model: timeline written to {}", path.display());
    }
    Ok(Ok((sim.latency, topo.name.clone())))
}
