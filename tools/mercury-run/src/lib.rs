//! `mercury-run` as a library: the compile path of the command (parse, verify, schedule), the
//! CPU backend and the GPU backend with its checked benchmark ([`gpu::checked_bench`]), which
//! `mercury-tune --profile-top` measures candidates with (the same code as `mercury-run
//! --backend cuda --check --bench`).

/// `println!` that drops the line when stdout is closed (`mercury-run ... | head -1`) instead
/// of panicking: the run goes on, and its exit status still reports the checks. Any other
/// failure to write (a full disk) is kept for [`stdout_failure`]: the report is lost, so the
/// run must not exit 0.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($t)*) {
            $crate::note_stdout_error(e);
        }
    }};
}

static STDOUT_FAILURE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records a failed write to standard output ([`outln!`]); a closed pipe is not a failure.
pub fn note_stdout_error(e: std::io::Error) {
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        let _ = STDOUT_FAILURE.set(e.to_string());
    }
}

/// The first failure to write standard output, if any (after a final flush): the caller
/// exits 1 with `mercury-run: error: could not write standard output: <why>`.
pub fn stdout_failure() -> Option<String> {
    use std::io::Write as _;
    if let Err(e) = std::io::stdout().flush() {
        note_stdout_error(e);
    }
    STDOUT_FAILURE.get().cloned()
}

pub mod args;
#[cfg(feature = "cuda")]
mod bwd_check;
pub mod check;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "cuda")]
pub mod launched;

use mercury_driver::{Compiler, Schedule, ScheduleError};
use mercury_ir::{Diagnostic, Operation};

/// What went wrong, with the exit status it maps to. The messages of `Input`, `Check` and
/// `NoDevice` have no place in a file and no prefix: [`Failure::render`] prints them as
/// `mercury-run: error: <message>`, the one place the prefix is added. `Located` holds a
/// rendered diagnostic (`file:line:col: error: ...`, the source line and a caret), printed as
/// it stands.
pub enum Failure {
    /// Bad input or arguments (exit 1), without a source location.
    Input(String),
    /// Bad input at a place in a file (exit 1): a rendered diagnostic ([`diag`]).
    Located(String),
    /// A numerics check failed (exit 1).
    Check(String),
    /// No usable GPU or library (exit 2).
    NoDevice(String),
}

/// The prefix of mercury-run's messages that have no place in a file: [`Failure::render`]
/// puts `mercury-run: error: ` before every unlocated message (the messages themselves never
/// start with it).
pub const TOOL: &str = "mercury-run";

impl Failure {
    /// The message as it stands: a rendered diagnostic, or the words without a prefix.
    pub fn message(&self) -> &str {
        match self {
            Failure::Input(m) | Failure::Located(m) | Failure::Check(m) | Failure::NoDevice(m) => m,
        }
    }

    /// The exit status: 2 without a usable GPU, 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self {
            Failure::NoDevice(_) => 2,
            _ => mercury_driver::cli::BAD_INPUT,
        }
    }

    /// The complete text mercury-run prints to standard error, ending in a newline: a located
    /// diagnostic as it stands, anything else as `mercury-run: error: <message>`.
    pub fn render(&self) -> String {
        let text = match self {
            Failure::Located(m) => m.trim_end().to_string(),
            other => format!("{TOOL}: error: {}", other.message().trim_end()),
        };
        text + "\n"
    }
}

/// The module, scheduled and verified, and the unscheduled reference module.
pub struct Compiled {
    pub scheduled: Operation,
    pub reference: Operation,
    pub kernel: String,
    /// The kernel as the input declares it (before scheduling): its outputs' placements are
    /// what `--check` holds each rank to. When the schedule re-shapes the mesh to another
    /// device count, the declared kernel re-shaped the same way (`reshape-mesh`).
    pub declared: mercury_commir::Kernel,
}

/// A diagnostic as an input failure: located when it has a place in a file; without one, its
/// message (and notes) as an unlocated input failure (`mercury-run: error: ...`, not
/// `<unknown>: error: ...`).
pub fn diag(d: Diagnostic) -> Failure {
    if d.loc == mercury_ir::Location::Unknown {
        let mut m = d.message;
        for n in &d.notes {
            m.push('\n');
            m.push_str(n.render().trim_end());
        }
        return Failure::Input(m);
    }
    Failure::Located(d.render())
}

/// Parses, verifies and schedules the input (the compile path, `mercury_driver`).
pub fn compile(a: &args::Args, compiler: &Compiler) -> Result<Compiled, Failure> {
    let text = std::fs::read_to_string(&a.input)
        .map_err(|e| Failure::Input(format!("cannot read '{}': {e}", a.input.display())))?;
    let module = compiler
        .parse(&a.input.display().to_string(), &text)
        .map_err(diag)?;
    let kernels = mercury_commir::kernels(&module).map_err(diag)?;
    let kernel = match &a.kernel {
        Some(k) => kernels
            .iter()
            .find(|x| x.name == k.trim_start_matches('@'))
            .map(|x| x.name.clone())
            .ok_or_else(|| {
                Failure::Input(format!(
                    "no kernel '@{}' in the input (it has {})",
                    k.trim_start_matches('@'),
                    mercury_commir::kernel_names(&kernels)
                ))
            })?,
        None => match kernels.as_slice() {
            [k] => k.name.clone(),
            [] => return Err(Failure::Input("the input has no commir.kernel".into())),
            ks => {
                return Err(Failure::Input(format!(
                    "the input has several kernels ({}); choose one with --kernel NAME",
                    mercury_commir::kernel_names(ks)
                )))
            }
        },
    };
    let script =
        match &a.schedule {
            Some(s) => Some(std::fs::read_to_string(s).map_err(|e| {
                Failure::Input(format!("cannot read schedule '{}': {e}", s.display()))
            })?),
            None => None,
        };
    let schedule = Schedule {
        shift_shard: a.shift_shard,
        script,
        script_name: a.schedule.as_ref().map(|s| s.display().to_string()),
        pipeline: a.pass_pipeline.clone(),
        // --kernel limits the schedule to that kernel (passes that name none), as it limits
        // the run.
        kernel: a.kernel.as_ref().map(|_| kernel.clone()),
    };
    let mut pm = compiler.pass_manager(&schedule).map_err(|e| match e {
        ScheduleError::ShiftShard(m) => Failure::Input(m),
        ScheduleError::Script(d) | ScheduleError::Pipeline(d) => diag(d),
    })?;
    let mut scheduled = module.clone();
    pm.run(&mut scheduled, &compiler.registry).map_err(diag)?;
    let mut declared = kernels
        .into_iter()
        .find(|k| k.name == kernel)
        .expect("the kernel was chosen from this list");
    // A schedule that re-shapes the mesh to another device count (`reshape-mesh`, as
    // mercury-tune --refactor-mesh writes for a topology of another size) holds every rank to
    // the declared placements re-expressed on the new mesh, as `reshape-mesh` re-expresses
    // them (the contract the search checked the schedule against), and says so.
    let now: Vec<usize> = mercury_commir::kernels(&scheduled)
        .map_err(diag)?
        .into_iter()
        .find(|k| k.name == kernel)
        .map(|k| k.mesh.shape)
        .unwrap_or_else(|| declared.mesh.shape.clone());
    if now.iter().product::<usize>() != declared.mesh.shape.iter().product::<usize>() {
        let mut m = module.clone();
        if now.iter().product::<usize>() == 1 {
            // `single-device`: the declared operator on one device (what reshape-mesh cannot
            // say of a buffer replicated over some level: it would become sharded).
            mercury_passes::mesh::single_device(&mut m);
        } else {
            mercury_passes::mesh::reshape_mesh(&mut m, &now, &kernel).map_err(diag)?;
        }
        if let Some(k) = mercury_commir::kernels(&m)
            .map_err(diag)?
            .into_iter()
            .find(|k| k.name == kernel)
        {
            outln!("{}", reexpressed(&declared, &k));
            declared = k;
        }
    }
    Ok(Compiled {
        scheduled,
        reference: single_device(&module),
        kernel,
        declared,
    })
}

/// The line telling that `--check` holds the ranks to `now`'s output placements (the declared
/// kernel re-shaped to the schedule's mesh) instead of `declared`'s: "declared placement
/// re-expressed on mesh [16]: @O 'sharding [..]' (declared 'sharding [..]' on mesh [2, 8])",
/// one entry per output.
fn reexpressed(declared: &mercury_commir::Kernel, now: &mercury_commir::Kernel) -> String {
    use mercury_commir::Role;
    use mercury_passes::util::describe;
    let outputs: Vec<String> = now
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        .map(|b| {
            let was = declared
                .buffer(&b.name)
                .map(|d| describe(&d.placement()))
                .unwrap_or_else(|| "nothing".into());
            format!(
                "@{} {} (declared {was} on mesh {:?})",
                b.name,
                describe(&b.placement()),
                declared.mesh.shape
            )
        })
        .collect();
    format!(
        "declared placement re-expressed on mesh {:?}: {}",
        now.mesh.shape,
        outputs.join("; ")
    )
}

/// The operator on one device (the `single-device` pass): its plan is the single-device patch
/// the schedules are checked and timed against.
pub fn single_device(module: &Operation) -> Operation {
    let mut m = module.clone();
    mercury_passes::mesh::single_device(&mut m);
    m
}

/// The single-device plan of the operator (the reference of `--check` and `--bench`).
///
/// An input that is already scheduled (a loop `parallel` or `shift`) has no unscheduled
/// operator to be held to: its reference would be the same IR on one device, its loops in turn,
/// lowered by the same conversion of the tiled body. Such a check catches errors of the
/// distribution (communication, placement) but not of the body's lowering: a mask applied at
/// wrong positions was wrong the same way on both sides and passed (new-user pass,
/// 2026-12-02). So `--check` refuses it, located at the first scheduled loop, unless
/// `--self-reference` asks for that weaker check; `--bench` alone times against it with a note.
/// An input with sequential loops only is the operator as given, checked with a note that the
/// reference shares its loops and blocks.
///
/// # Errors
/// `Failure::Located` for a scheduled input under `--check` without `--self-reference`, and
/// when the reference cannot be lowered.
pub fn reference_plan(a: &args::Args, c: &Compiled) -> Result<mercury_plan::Plan, Failure> {
    let loops = c.declared.loops();
    let scheduled = loops
        .iter()
        .find(|l| l.parallel.is_some() || l.shift.is_some());
    static NOTE: std::sync::Once = std::sync::Once::new();
    if let Some(l) = scheduled {
        if a.check && !a.self_reference {
            let how = if l.parallel.is_some() {
                "parallel"
            } else {
                "shifted"
            };
            return Err(diag(
                Diagnostic::error(
                    l.loc.clone(),
                    format!(
                        "--check needs the unscheduled operator: the input is already scheduled (loop over '{}' is {how})",
                        l.axis
                    ),
                )
                .with_note(
                    mercury_ir::Location::Unknown,
                    "give the operator and its schedule (--schedule FILE, --shift-shard or --pass-pipeline), or --self-reference to check against this IR on one device, which checks the distribution but not the lowering of its tiled body",
                ),
            ));
        }
        NOTE.call_once(|| outln!(
            "{TOOL}: note: the input is already scheduled: the reference is this IR on one device, its loops in turn; a check against it covers the distribution, not the lowering of the tiled body (give the unscheduled operator and the schedule to check against the operator itself)"
        ));
    } else if a.check && !loops.is_empty() {
        // Sequential loops (hand-written, or a tiling as `mercury-opt` printed it) are the
        // operator as given: the reference shares them and their blocks.
        NOTE.call_once(|| outln!(
            "{TOOL}: note: the input has loops: the reference is this IR on one device with the same loops and blocks, so a wrong lowering of a blocked body would be wrong on both sides (give the operator without them and the tiling as a schedule to check the blocks too)"
        ));
    }
    const NEEDS: &str = "the single-device reference needs the local (unscheduled) operator as input, with the schedule given by --schedule, --shift-shard or --pass-pipeline";
    mercury_driver::lower(&c.reference, Some(&c.kernel)).map_err(|d| match diag(d) {
        Failure::Located(m) => Failure::Located(format!("{m}{TOOL}: note: {NEEDS}")),
        f => Failure::Input(format!("{}\n{TOOL}: note: {NEEDS}", f.message())),
    })
}
