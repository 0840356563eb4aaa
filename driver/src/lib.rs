//! The compile path of Mercury-rs, in one place: the dialect registry (builtin + CommIR), every
//! pass (the schedule primitives and the conversion's print passes), parsing and verifying a
//! module, applying a schedule (`--shift-shard`, a `.sched` script, a pass pipeline) and
//! lowering a kernel to its per-rank plan. `mercury-opt`, `mercury-run`, `mercury-tune` (through
//! the search) and the tests all compile through a [`Compiler`]. [`cli`] holds the
//! command-line conventions the tools share (exit statuses of usage errors).

pub mod cli;

pub use mercury_passes::schedule_pipeline;

use mercury_ir::pass::{PassManager, PassRegistry};
use mercury_ir::{parse_source, verify, Diagnostic, Operation, Registry, SourceFile};
use mercury_plan::Plan;
use std::sync::Arc;

/// How a module is scheduled: the pieces apply in this order (as `mercury-run` takes them).
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// The `shift-shard` pass first, with these options (`--shift-shard="balance=false"`:
    /// `[("balance", "false")]`, read by [`cli::pass_options`]); `None`: not applied.
    pub shift_shard: Option<Vec<(String, String)>>,
    /// A schedule script: one pass per line, `#` comments (`--schedule FILE`'s text).
    pub script: Option<String>,
    /// The name the script's diagnostics use (`FILE`; `<schedule>` when unset).
    pub script_name: Option<String>,
    /// A textual pass pipeline (`--pass-pipeline`).
    pub pipeline: Option<String>,
    /// The kernel the pieces transform (`--kernel`): every pass that can be limited to one
    /// kernel and does not name one itself transforms this one. `None`: every kernel.
    pub kernel: Option<String>,
}

impl Schedule {
    /// A schedule script's text.
    pub fn script(text: &str) -> Schedule {
        Schedule {
            script: Some(text.to_string()),
            ..Schedule::default()
        }
    }
    /// The `shift-shard` schedule, with its default options.
    pub fn shift_shard() -> Schedule {
        Schedule {
            shift_shard: Some(vec![]),
            ..Schedule::default()
        }
    }
    /// A pass pipeline.
    pub fn pipeline(text: &str) -> Schedule {
        Schedule {
            pipeline: Some(text.to_string()),
            ..Schedule::default()
        }
    }
}

/// Where a schedule could not be set up (an unknown pass, bad options, a pipeline that does
/// not parse): which piece, and why. Errors in a script or a pipeline are located in its text
/// (`file:line:col`, with "did you mean" for unknown names).
#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// In `--shift-shard`.
    ShiftShard(String),
    /// In the schedule script.
    Script(Diagnostic),
    /// In the pass pipeline.
    Pipeline(Diagnostic),
}

impl ScheduleError {
    /// The error as a diagnostic; `at` locates the one without a place of its own.
    pub fn into_diagnostic(self, at: mercury_ir::Location) -> Diagnostic {
        match self {
            ScheduleError::ShiftShard(m) => Diagnostic::error(at, m),
            ScheduleError::Script(d) | ScheduleError::Pipeline(d) => d,
        }
    }
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::ShiftShard(m) => f.write_str(m),
            ScheduleError::Script(d) | ScheduleError::Pipeline(d) => {
                f.write_str(d.render().trim_end())
            }
        }
    }
}

/// The registries of the compile path.
pub struct Compiler {
    /// Builtin dialects plus CommIR.
    pub registry: Registry,
    /// Every pass.
    pub passes: PassRegistry,
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler::new()
    }
}

impl Compiler {
    /// The builtin dialects plus CommIR, and every pass.
    pub fn new() -> Compiler {
        Compiler {
            registry: registry(false),
            passes: passes(),
        }
    }

    /// Parses `text` (named `name` in diagnostics) and verifies it.
    pub fn parse(&self, name: &str, text: &str) -> Result<Operation, Diagnostic> {
        self.parse_source(&SourceFile::new(name, text.to_string()))
    }

    /// Parses a source file and verifies it.
    pub fn parse_source(&self, file: &Arc<SourceFile>) -> Result<Operation, Diagnostic> {
        let module = parse_source(&self.registry, file)?;
        verify(&self.registry, &module)?;
        Ok(module)
    }

    /// A pass manager running `schedule` (verifying after each pass).
    pub fn pass_manager(&self, schedule: &Schedule) -> Result<PassManager, ScheduleError> {
        let mut pm = PassManager::new();
        pm.default_target = schedule.kernel.clone();
        if let Some(options) = &schedule.shift_shard {
            pm.add(&self.passes, "shift-shard", options)
                .map_err(ScheduleError::ShiftShard)?;
        }
        if let Some(script) = &schedule.script {
            let name = schedule.script_name.as_deref().unwrap_or("<schedule>");
            pm.add_schedule(&self.passes, &SourceFile::new(name, script.as_str()))
                .map_err(ScheduleError::Script)?;
        }
        if let Some(p) = &schedule.pipeline {
            pm.add_pipeline_source(
                &self.passes,
                &SourceFile::new("<pass-pipeline>", p.as_str()),
            )
            .map_err(ScheduleError::Pipeline)?;
        }
        Ok(pm)
    }

    /// Applies `schedule` to `module`. A schedule that cannot be set up is reported at the
    /// module's location.
    pub fn schedule(&self, module: &mut Operation, schedule: &Schedule) -> Result<(), Diagnostic> {
        let mut pm = self
            .pass_manager(schedule)
            .map_err(|e| e.into_diagnostic(module.loc.clone()))?;
        pm.run(module, &self.registry)
    }

    /// Lowers kernel `kernel` (or the only kernel) of `module` to its per-rank plan.
    pub fn lower(&self, module: &Operation, kernel: Option<&str>) -> Result<Plan, Diagnostic> {
        lower(module, kernel)
    }

    /// Parse, verify, schedule and lower: the plan of `text` under `schedule` (of the kernel
    /// `schedule.kernel` names, else of the only kernel).
    pub fn compile(&self, name: &str, text: &str, schedule: &Schedule) -> Result<Plan, Diagnostic> {
        let mut module = self.parse(name, text)?;
        self.schedule(&mut module, schedule)?;
        self.lower(&module, schedule.kernel.as_deref())
    }
}

/// Lowers kernel `kernel` (or the only kernel) of `module` to its per-rank plan.
pub fn lower(module: &Operation, kernel: Option<&str>) -> Result<Plan, Diagnostic> {
    mercury_conversion::lower_module(module, kernel)
}

/// The builtin dialects plus CommIR.
pub fn registry(allow_unregistered: bool) -> Registry {
    let mut r = mercury_commir::registry();
    r.allow_unregistered = allow_unregistered;
    r
}

/// Every pass: the IR core's, the schedule primitives and the conversion's print passes.
pub fn passes() -> PassRegistry {
    let mut p = PassRegistry::new();
    mercury_passes::register_all(&mut p);
    mercury_conversion::passes::register(&mut p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const WS: &str = "commir.mesh @m shape [4]
commir.kernel @ws on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 32 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
";

    #[test]
    fn compiles_with_each_kind_of_schedule() {
        let c = Compiler::new();
        let plain = c.compile("ws.mlir", WS, &Schedule::default()).unwrap();
        let ring = c.compile("ws.mlir", WS, &Schedule::shift_shard()).unwrap();
        assert_eq!(plain.ranks.len(), 4);
        assert!(ring.num_stages() > plain.num_stages());
        let script = "tile{axis=i factor=4 outer=i0 inner=i_t}\nparallelize{axis=i0 level=0}\n";
        assert!(c.compile("ws.mlir", WS, &Schedule::script(script)).is_ok());
        let bad = c.compile("ws.mlir", WS, &Schedule::pipeline("builtin.module(nope)"));
        assert!(bad
            .unwrap_err()
            .message
            .contains("'nope' does not refer to a registered pass"));
        assert!(c.parse("bad.mlir", "commir.kernel").is_err());
    }
}
