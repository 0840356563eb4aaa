//! `schedule="auto"`: the schedule of an operator chosen by the search (cost model, schedule
//! cache, profiling when the caller measures), as `mercury-tune` chooses it. [`operator_source`]
//! is where every tuning run gets its candidates from (`mercury-tune FILE`, `mercury.compile(...,
//! schedule="auto")`); [`choose`] runs the search without measuring and returns the chosen
//! schedule's transform script, which then compiles through [`crate::compile`] like any
//! other schedule.

use crate::error::Error;
use mercury_search::commir_source::CommirSource;
use mercury_search::operator::OperatorSpec;
use mercury_search::search::{
    tune, CandidateSource, NoProgress, PlanListSource, SourceError, TuneError, TuneOptions,
    TuningReport,
};
use mercury_search::templates::template_of;
use mercury_search::topology::Topology;
use std::path::PathBuf;

/// The candidate source of an operator, the single-device reference plan that profiled
/// candidates are checked against (`None` for plans given as JSON), and the operator text the
/// transform scripts apply to when the input is not CommIR (`.toml`).
pub struct TuneSource {
    /// Where candidates come from.
    pub source: Box<dyn CandidateSource>,
    /// The single-device plan (`None` for plans given as JSON).
    pub reference: Option<Result<mercury_plan::Plan, SourceError>>,
    /// For a `.toml` description: the CommIR operator it was written into.
    pub generated_text: Option<String>,
}

/// What an operator text is, by its file's extension: a CommIR module, an operator
/// description, or plans as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `.mlir`: a CommIR operator.
    Commir,
    /// `.toml`: an attention or GEMM shape (`mercury_search::operator::OperatorSpec`).
    Description,
    /// `.json`: one plan, a list of plans or a list of candidates.
    Plans,
}

impl SourceKind {
    /// The kind of a file by its extension (`None`: unknown).
    pub fn of_extension(ext: Option<&str>) -> Option<SourceKind> {
        match ext {
            Some("mlir") => Some(SourceKind::Commir),
            Some("toml") => Some(SourceKind::Description),
            Some("json") => Some(SourceKind::Plans),
            _ => None,
        }
    }
}

/// The candidates of `text` (named `origin`), of kind `kind`. A `.mlir` operator keeps its
/// declared mesh unless `refactor_mesh`; `max_levels` bounds the meshes enumerated; `kernel`
/// picks one kernel of a file holding several; a description is written for `devices`
/// devices.
///
/// # Errors
/// Options the kind does not take, and what the generator refuses (located when it has a place
/// in the text).
pub fn operator_source(
    text: &str,
    origin: &str,
    kind: SourceKind,
    refactor_mesh: bool,
    max_levels: Option<usize>,
    kernel: Option<&str>,
    devices: usize,
) -> Result<TuneSource, SourceError> {
    let bounded = |src: CommirSource| match max_levels {
        Some(n) => src.with_max_levels(n),
        None => src,
    };
    if let (Some(n), SourceKind::Plans) = (max_levels, kind) {
        return Err(SourceError::new(format!(
            "--max-mesh-levels {n}: '{origin}' gives plans, their meshes are set; the option bounds the meshes the CommIR generator enumerates (.toml, or .mlir with --refactor-mesh)"
        )));
    }
    if let (Some(n), SourceKind::Commir, false) = (max_levels, kind, refactor_mesh) {
        return Err(SourceError::new(format!(
            "--max-mesh-levels {n}: without --refactor-mesh the search keeps the operator's declared mesh; add --refactor-mesh to enumerate meshes of up to {n} levels"
        )));
    }
    if let (Some(k), false) = (kernel, kind == SourceKind::Commir) {
        return Err(SourceError::new(format!(
            "--kernel {k}: only a CommIR operator (.mlir) names its kernels; '{origin}' is not one"
        )));
    }
    match kind {
        // A shape description declares no mesh: it is written for the topology's devices,
        // and they are factored.
        SourceKind::Description => {
            let src = bounded(OperatorSpec::parse_on(text, origin, devices)?.source()?);
            Ok(TuneSource {
                reference: Some(src.reference_plan()),
                generated_text: Some(src.operator_text()),
                source: Box::new(src),
            })
        }
        SourceKind::Plans => Ok(TuneSource {
            source: Box::new(PlanListSource::from_json(text, origin)?),
            reference: None,
            generated_text: None,
        }),
        SourceKind::Commir => {
            let mut src = CommirSource::from_text(text, origin, kernel)?;
            if !refactor_mesh {
                src = src.keep_declared_mesh();
            }
            src = bounded(src);
            Ok(TuneSource {
                reference: Some(src.reference_plan()),
                generated_text: None,
                source: Box::new(src),
            })
        }
    }
}

/// The topology `schedule="auto"` prices an operator of `devices` devices on when the caller
/// names none: one node of `devices` GPUs of the `h100-1x8` preset (`h200-1x8` when `gpu`, the
/// name of the GPU the operator will run on, names an H200), its GPU level re-sized, named
/// `<preset>` with `1x8` replaced by `1x<devices>`.
pub fn default_topology(devices: usize, gpu: Option<&str>) -> Result<Topology, Error> {
    let base = match gpu {
        Some(g) if g.to_ascii_uppercase().contains("H200") => "h200-1x8",
        _ => "h100-1x8",
    };
    let mut t = Topology::preset(base)
        .expect("the preset is embedded")
        .map_err(|e| Error::Input(e.to_string()))?;
    let Some(gpu_level) = t.levels.last_mut() else {
        return Err(Error::Input(format!("preset {base} has no levels")));
    };
    gpu_level.size = devices.max(1);
    for l in t.levels.iter_mut().rev().skip(1) {
        l.size = 1;
    }
    t.name = base.replace("1x8", &format!("1x{}", devices.max(1)));
    t.validate()
        .map_err(|e| Error::Input(format!("topology {}: {e}", t.name)))?;
    Ok(t)
}

/// The schedule the search chose.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The transform script: applies to the operator text as given.
    pub script: String,
    /// The candidate's name (`mesh [8] [ring]`, ...).
    pub name: String,
    /// The known template it is (`ring`, `ulysses`, ...), if any.
    pub template: Option<String>,
    /// The cost model's latency, seconds.
    pub predicted_s: Option<f64>,
    /// The cost of the search and how the schedule was chosen (`search`, `cache`, ...).
    pub report: TuningReport,
    /// The topology it was priced on.
    pub topology: String,
}

impl Chosen {
    /// One line: which schedule and why ("ring attention over 8 ranks, chosen by search on
    /// h100-1x8: predicted 1.234 ms").
    pub fn describe(&self) -> String {
        format!(
            "{} ({}), chosen by {} on {}{}",
            self.name,
            self.template
                .as_deref()
                .map(|t| format!("known template: {t}"))
                .unwrap_or_else(|| "new schedule".into()),
            self.report.decision,
            self.topology,
            self.predicted_s
                .map(|s| format!(": predicted {:.3} ms", s * 1e3))
                .unwrap_or_default()
        )
    }
}

/// The schedule of the CommIR operator `text` (kernel `kernel`, or its only one) the search
/// picks on `topo` with the cost model, through the schedule cache in `cache` when given (a
/// hit is used as it is; a miss searches and stores). The operator's declared mesh is kept.
///
/// # Errors
/// What the generator refuses (a kernel that is neither one attention nor one GEMM:
/// "give a hand-written schedule"), located where it has a place; no feasible candidate.
pub fn choose(
    text: &str,
    origin: &str,
    kernel: Option<&str>,
    topo: &Topology,
    cache: Option<PathBuf>,
) -> Result<Chosen, Error> {
    let src_err = |e: SourceError| {
        if e.located {
            Error::Located(e.message)
        } else {
            Error::Input(format!("schedule=\"auto\": {}", e.message.trim_end()))
        }
    };
    let mut src = operator_source(
        text,
        origin,
        SourceKind::Commir,
        false,
        None,
        kernel,
        topo.num_devices(),
    )
    .map_err(src_err)?;
    let opts = TuneOptions {
        profile_top: 0,
        no_search: false,
        cache_dir: cache,
    };
    let res =
        tune(src.source.as_mut(), topo, &opts, None, &mut NoProgress).map_err(|e| match e {
            TuneError::Source(e) => src_err(e),
            other => Error::Input(format!("schedule=\"auto\": {other}")),
        })?;
    let c = &res.ranked[res.chosen];
    Ok(Chosen {
        script: c.candidate.transform_script.clone(),
        name: c.candidate.name.clone(),
        template: template_of(&c.candidate.name),
        predicted_s: c.predicted_s,
        report: res.report.clone(),
        topology: topo.name.clone(),
    })
}
