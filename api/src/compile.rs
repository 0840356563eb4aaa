//! The compile path of a run: parse and verify the source, choose its kernel, apply the
//! schedule, and keep what a run is checked against (the declared kernel, the single-device
//! operator). `mercury-run` and the Python package's `mercury.compile` both come through
//! [`compile`].

use crate::error::{diag, Error};
use mercury_driver::{Compiler, Schedule, ScheduleError};
use mercury_ir::Operation;

/// The module, scheduled and verified, and the unscheduled reference module.
pub struct Compiled {
    /// The module after the schedule.
    pub scheduled: Operation,
    /// The operator on one device (the `single-device` pass of the module as given).
    pub reference: Operation,
    /// The kernel the run compiles (the only one, or the one asked for).
    pub kernel: String,
    /// The kernel as the input declares it (before scheduling): its outputs' placements are
    /// what a check holds each rank to. When the schedule re-shapes the mesh to another
    /// device count, the declared kernel re-shaped the same way (`reshape-mesh`).
    pub declared: mercury_commir::Kernel,
    /// Lines to tell the user (the declared placements re-expressed on a re-shaped mesh).
    pub notes: Vec<String>,
}

impl Compiled {
    /// The per-rank plan of the scheduled kernel.
    pub fn lower(&self) -> Result<mercury_plan::Plan, Error> {
        mercury_driver::lower(&self.scheduled, Some(&self.kernel)).map_err(diag)
    }
}

/// Parses and verifies `text` (named `name` in diagnostics), chooses its kernel (`kernel`, or
/// the only one), and applies `schedule` (its `kernel` field is set here: a `kernel` asked for
/// limits the schedule's passes to that kernel).
///
/// # Errors
/// A located [`Error::Located`] for what the parser, the verifier or a pass refuses;
/// [`Error::Input`] for a kernel that is not there, a file of several kernels without
/// `kernel`, and a schedule that cannot be set up without a place in a file.
pub fn compile(
    compiler: &Compiler,
    name: &str,
    text: &str,
    kernel: Option<&str>,
    mut schedule: Schedule,
) -> Result<Compiled, Error> {
    let module = compiler.parse(name, text).map_err(diag)?;
    let kernels = mercury_commir::kernels(&module).map_err(diag)?;
    let chosen = select_kernel(&kernels, kernel)?.name.clone();
    // A kernel asked for limits the schedule to it (passes that name none), as it limits the
    // run.
    schedule.kernel = kernel.map(|_| chosen.clone());
    let mut pm = compiler.pass_manager(&schedule).map_err(|e| match e {
        ScheduleError::ShiftShard(m) => Error::Input(m),
        ScheduleError::Script(d) | ScheduleError::Pipeline(d) => diag(d),
    })?;
    let mut scheduled = module.clone();
    pm.run(&mut scheduled, &compiler.registry).map_err(diag)?;
    // The edges the script places are declared where it places them (`place-edge`).
    let kernels =
        mercury_commir::kernels(&placed_edges(compiler, &module, &schedule)?).map_err(diag)?;
    let mut declared = kernels
        .into_iter()
        .find(|k| k.name == chosen)
        .expect("the kernel was chosen from this list");
    let mut notes = Vec::new();
    // A schedule that re-shapes the mesh to another device count (`reshape-mesh`, as
    // mercury-tune --refactor-mesh writes for a topology of another size) holds every rank to
    // the declared placements re-expressed on the new mesh, as `reshape-mesh` re-expresses
    // them (the contract the search checked the schedule against), and says so.
    let now: Vec<usize> = mercury_commir::kernels(&scheduled)
        .map_err(diag)?
        .into_iter()
        .find(|k| k.name == chosen)
        .map(|k| k.mesh.shape)
        .unwrap_or_else(|| declared.mesh.shape.clone());
    if now.iter().product::<usize>() != declared.mesh.shape.iter().product::<usize>() {
        let mut m = module.clone();
        if now.iter().product::<usize>() == 1 {
            // `single-device`: the declared operator on one device (what reshape-mesh cannot
            // say of a buffer replicated over some level: it would become sharded).
            mercury_passes::mesh::single_device(&mut m);
        } else {
            mercury_passes::mesh::reshape_mesh(&mut m, &now, &chosen).map_err(diag)?;
        }
        if let Some(k) = mercury_commir::kernels(&m)
            .map_err(diag)?
            .into_iter()
            .find(|k| k.name == chosen)
        {
            notes.push(reexpressed(&declared, &k));
            declared = k;
        }
    }
    Ok(Compiled {
        scheduled,
        reference: single_device(&module),
        kernel: chosen,
        declared,
        notes,
    })
}

/// `module` with the schedule script's `place-edge` passes applied, and nothing else: the
/// module as the schedule declares it. `place-edge` chooses where a buffer between two kernels
/// lives, at its writer and its readers alike (docs/primitives.md), so the writer's output is
/// declared there and a check holds the ranks to that placement; every other pass keeps an
/// output's declared placement.
///
/// # Errors
/// A `place-edge` pass that refuses (located), as the schedule itself would.
pub fn placed_edges(
    compiler: &Compiler,
    module: &Operation,
    schedule: &Schedule,
) -> Result<Operation, Error> {
    let mut m = module.clone();
    let Some(script) = &schedule.script else {
        return Ok(m);
    };
    let lines: Vec<&str> = script
        .lines()
        .map(|l| l[..mercury_ir::pass::schedule_comment_start(l).unwrap_or(l.len())].trim())
        .filter(|l| l.starts_with("place-edge{") || *l == "place-edge")
        .collect();
    if lines.is_empty() {
        return Ok(m);
    }
    let mut pm = compiler
        .pass_manager(&Schedule::script(&lines.join("\n")))
        .map_err(|e| match e {
            ScheduleError::ShiftShard(m) => Error::Input(m),
            ScheduleError::Script(d) | ScheduleError::Pipeline(d) => diag(d),
        })?;
    pm.run(&mut m, &compiler.registry).map_err(diag)?;
    Ok(m)
}

/// The line telling that a check holds the ranks to `now`'s output placements (the declared
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

/// The kernel `kernel` names (a leading `@` optional), or the input's only one.
///
/// # Errors
/// `Error::Input` naming the kernels there are: no kernel of that name, none at all, or
/// several and none named.
pub(crate) fn select_kernel<'a>(
    kernels: &'a [mercury_commir::Kernel],
    kernel: Option<&str>,
) -> Result<&'a mercury_commir::Kernel, Error> {
    match kernel {
        Some(k) => kernels
            .iter()
            .find(|x| x.name == k.trim_start_matches('@'))
            .ok_or_else(|| {
                Error::Input(format!(
                    "no kernel '@{}' in the input (it has {})",
                    k.trim_start_matches('@'),
                    mercury_commir::kernel_names(kernels)
                ))
            }),
        None => match kernels {
            [k] => Ok(k),
            [] => Err(Error::Input("the input has no commir.kernel".into())),
            ks => Err(Error::Input(format!(
                "the input has several kernels ({}); choose one with --kernel NAME",
                mercury_commir::kernel_names(ks)
            ))),
        },
    }
}
