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
pub mod balance;
#[cfg(feature = "cuda")]
mod bwd_check;
pub mod check;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "cuda")]
pub mod launched;
pub mod module;
pub mod train;

use mercury_driver::{Compiler, Schedule};
use mercury_ir::Diagnostic;

/// What went wrong, with the exit status it maps to (the library face's error:
/// [`mercury::Error`]); `mercury-run` prints it with [`TOOL`]'s prefix.
pub use mercury::Error as Failure;
pub use mercury::{diag, single_device, Compiled};

/// The prefix of mercury-run's messages that have no place in a file: `Failure::render(TOOL)`
/// puts `mercury-run: error: ` before every unlocated message (the messages themselves never
/// start with it).
pub const TOOL: &str = "mercury-run";

/// Reads, parses and verifies the input: its kernels' models.
pub fn input_kernels(
    a: &args::Args,
    compiler: &Compiler,
) -> Result<Vec<mercury_commir::Kernel>, Failure> {
    let text = std::fs::read_to_string(&a.input)
        .map_err(|e| Failure::Input(format!("cannot read '{}': {e}", a.input.display())))?;
    let module = compiler
        .parse(&a.input.display().to_string(), &text)
        .map_err(diag)?;
    mercury_commir::kernels(&module).map_err(diag)
}

/// The text of `--schedule`, if given.
pub(crate) fn read_schedule(a: &args::Args) -> Result<Option<String>, Failure> {
    a.schedule
        .as_ref()
        .map(|s| {
            std::fs::read_to_string(s)
                .map_err(|e| Failure::Input(format!("cannot read schedule '{}': {e}", s.display())))
        })
        .transpose()
}

/// Parses, verifies and schedules the input (the compile path of the library face,
/// [`mercury::compile`]), printing its notes.
pub fn compile(a: &args::Args, compiler: &Compiler) -> Result<Compiled, Failure> {
    let text = std::fs::read_to_string(&a.input)
        .map_err(|e| Failure::Input(format!("cannot read '{}': {e}", a.input.display())))?;
    let script = read_schedule(a)?;
    let schedule = Schedule {
        shift_shard: a
            .shift_shard
            .as_deref()
            .map(|o| mercury_driver::cli::pass_options("shift-shard", o))
            .transpose()
            .map_err(Failure::Input)?,
        script,
        script_name: a.schedule.as_ref().map(|s| s.display().to_string()),
        pipeline: a.pass_pipeline.clone(),
        kernel: None,
    };
    let c = mercury::compile(
        compiler,
        &a.input.display().to_string(),
        &text,
        a.kernel.as_deref(),
        schedule,
    )?;
    for n in &c.notes {
        outln!("{n}");
    }
    Ok(c)
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
