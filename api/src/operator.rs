//! A compiled operator: the source, the schedule that ran (and why it was chosen), its plan and
//! the reports `mercury-opt` prints. What `mercury.compile` returns.

use crate::auto::{self, Chosen};
use crate::compile::{compile, Compiled};
use crate::error::Error;
use mercury_driver::{Compiler, Schedule};
use mercury_plan::{GlobalBuffer, Plan, Role};
use mercury_search::topology::Topology;
use std::path::{Path, PathBuf};

/// How an operator is scheduled, as the Python package's `schedule=` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleSpec {
    /// No schedule: the operator as declared (every rank computes its placement's share
    /// with the collectives the lowering inserts).
    None,
    /// The search picks it (cost model and schedule cache): [`auto::choose`].
    Auto,
    /// A schedule script (one pass per line, `#` comments; a single pass name is one), named
    /// `name` in its diagnostics.
    Script { text: String, name: String },
    /// A textual pass pipeline (`builtin.module(...)`).
    Pipeline(String),
}

impl ScheduleSpec {
    /// Reads the Python package's `schedule=` string: `"auto"`, `"none"`, a path to a
    /// `.sched`/`.transform` file (read here), a pipeline `builtin.module(...)`, or a schedule
    /// script (a pass name such as `"shift-shard"` is a script of one line).
    ///
    /// # Errors
    /// An empty string; a name ending in `.sched`/`.transform` that is not a readable file.
    pub fn parse(s: &str) -> Result<ScheduleSpec, Error> {
        let t = s.trim();
        if t.is_empty() {
            return Err(Error::Input(
                "schedule: empty (give \"auto\", \"none\", a pass name, a schedule script or a .sched/.transform file)".into(),
            ));
        }
        if t == "auto" {
            return Ok(ScheduleSpec::Auto);
        }
        if t == "none" {
            return Ok(ScheduleSpec::None);
        }
        if t.starts_with("builtin.module(") {
            return Ok(ScheduleSpec::Pipeline(t.to_string()));
        }
        let looks_like_file = !t.contains('\n')
            && (t.ends_with(".sched") || t.ends_with(".transform") || Path::new(t).is_file());
        if looks_like_file {
            let text = std::fs::read_to_string(t)
                .map_err(|e| Error::Input(format!("cannot read schedule '{t}': {e}")))?;
            return Ok(ScheduleSpec::Script {
                text,
                name: t.to_string(),
            });
        }
        Ok(ScheduleSpec::Script {
            text: s.to_string(),
            name: "<schedule>".into(),
        })
    }
}

/// Where `schedule="auto"` looks and what it prices with.
#[derive(Debug, Clone, Default)]
pub struct AutoOptions {
    /// The machine the schedules are priced on (`None`: [`auto::default_topology`] of the
    /// operator's device count and `gpu`).
    pub topology: Option<Topology>,
    /// The GPU the operator will run on (its name), for the default topology.
    pub gpu: Option<String>,
    /// The schedule cache directory (`None`: no cache).
    pub cache: Option<PathBuf>,
}

/// An operator compiled with its schedule.
pub struct Operator {
    /// The compiled module (scheduled, declared kernel, single-device reference).
    pub compiled: Compiled,
    /// The per-rank plan.
    pub plan: Plan,
    /// The schedule that ran, as a schedule script (empty for none; a pipeline as given).
    pub schedule: String,
    /// How `schedule="auto"` chose it.
    pub chosen: Option<Chosen>,
}

impl Operator {
    /// Compiles `text` (named `name` in diagnostics: a path or `<source>`), kernel `kernel`
    /// (or its only one), with `schedule`.
    ///
    /// # Errors
    /// Everything [`compile`] and [`auto::choose`] refuse, and a plan the lowering refuses
    /// (located).
    pub fn compile(
        name: &str,
        text: &str,
        kernel: Option<&str>,
        schedule: &ScheduleSpec,
        auto_opts: &AutoOptions,
    ) -> Result<Operator, Error> {
        let compiler = Compiler::new();
        let mut chosen = None;
        let (sched, script) = match schedule {
            ScheduleSpec::None => (Schedule::default(), String::new()),
            ScheduleSpec::Script { text, name } => (
                Schedule {
                    script: Some(text.clone()),
                    script_name: Some(name.clone()),
                    ..Schedule::default()
                },
                text.clone(),
            ),
            ScheduleSpec::Pipeline(p) => (Schedule::pipeline(p), p.clone()),
            ScheduleSpec::Auto => {
                // The input and the kernel asked for first: their errors are not the search's.
                let devices = declared_devices(&compiler, name, text, kernel)?;
                let topo = match &auto_opts.topology {
                    Some(t) => t.clone(),
                    None => auto::default_topology(devices, auto_opts.gpu.as_deref())?,
                };
                let c = auto::choose(text, name, kernel, &topo, auto_opts.cache.clone())?;
                let s = Schedule {
                    script: Some(c.script.clone()),
                    script_name: Some(format!("<schedule chosen for {name}>")),
                    ..Schedule::default()
                };
                let script = c.script.clone();
                chosen = Some(c);
                (s, script)
            }
        };
        let compiled = compile(&compiler, name, text, kernel, sched)?;
        let plan = compiled.lower()?;
        Ok(Operator {
            compiled,
            plan,
            schedule: script,
            chosen,
        })
    }

    /// The communication plan report (`mercury-opt --commir-print-comm-plan`'s text).
    pub fn comm_plan(&self) -> String {
        let mut s = mercury_conversion::report::comm_plan(&self.plan, false);
        if let Some(b) = mercury_conversion::report::causal_balance(&self.plan) {
            s += &b;
        }
        s
    }

    /// The memory report (peak bytes per rank and what holds them).
    pub fn memory(&self) -> String {
        mercury_conversion::report::memory(&self.plan)
    }

    /// The operator's input buffers, in declaration order.
    pub fn inputs(&self) -> Vec<&GlobalBuffer> {
        self.plan
            .buffers
            .iter()
            .filter(|b| b.role == Role::Input)
            .collect()
    }

    /// The operator's output buffers, in declaration order.
    pub fn outputs(&self) -> Vec<&GlobalBuffer> {
        self.plan
            .buffers
            .iter()
            .filter(|b| b.role == Role::Output)
            .collect()
    }
}

/// The device count of the declared mesh of `kernel` (or the only kernel) of `text`.
fn declared_devices(
    compiler: &Compiler,
    name: &str,
    text: &str,
    kernel: Option<&str>,
) -> Result<usize, Error> {
    let module = compiler.parse(name, text).map_err(crate::error::diag)?;
    let kernels = mercury_commir::kernels(&module).map_err(crate::error::diag)?;
    let k = crate::compile::select_kernel(&kernels, kernel)?;
    Ok(k.mesh.shape.iter().product())
}
