//! Candidate ranking: where schedules come from ([`CandidateSource`]), how they are judged
//! (verify -> memory prune -> simulate -> optional profiling, [`evaluate`]), the
//! latency/memory Pareto frontier, and the tuning driver with its cost report ([`tune`]).

use crate::cache::{CacheKey, CacheLookup, CachedSchedule, ScheduleCache};
use crate::memory::{memory_report, MemoryReport};
use crate::sim::{simulate, SimOptions, Simulation};
use crate::topology::Topology;
use mercury_plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

mod cache_visit;
mod plan_list;
#[cfg(test)]
mod tests;

use cache_visit::{CacheOutcome, CacheVisit};
pub use plan_list::PlanListSource;

/// One schedule of an operator: what the CommIR generator (or a fixture builder) produces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub name: String,
    /// The schedule as a transform script (the primitives applied); written to the output.
    pub transform_script: String,
    /// The annotated CommIR after the schedule (may be empty for fixture plans).
    #[serde(default)]
    pub annotated_ir: String,
    pub plan: Plan,
}

/// Why a candidate source could not give a candidate: a message that names the input, or a
/// located diagnostic of it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .message.trim_end())]
pub struct SourceError {
    /// What went wrong; when `located`, a rendered diagnostic (`file:line:col: error: ...`,
    /// the source line and a caret).
    pub message: String,
    /// Whether `message` is a located diagnostic, complete as it stands: a tool prints it
    /// without a prefix of its own (as mercury-opt prints diagnostics).
    pub located: bool,
}

impl SourceError {
    /// An error without a place in the input (the message names the input).
    pub fn new(msg: impl Into<String>) -> Self {
        SourceError {
            message: msg.into(),
            located: false,
        }
    }

    /// An error at a place in the input: the diagnostic, rendered.
    pub fn located(d: &mercury_ir::Diagnostic) -> Self {
        SourceError {
            message: d.render(),
            located: true,
        }
    }
}

/// Where candidates come from: fixture plans (`FixtureSource`), plans given as JSON
/// (`PlanListSource`), or a CommIR operator (`crate::commir_source::CommirSource`, which
/// enumerates schedules over every mesh factorisation).
pub trait CandidateSource {
    /// One line for reports.
    fn describe(&self) -> String;
    /// The operator's shape signature (kind, shapes, dtypes, flags): part of the cache key.
    /// Must not depend on the topology or on schedule choices.
    fn signature(&self) -> String;
    /// Candidate schedules for `topo`, lazily. A failing candidate is reported and skipped;
    /// an `Err` from this function aborts the search.
    #[allow(clippy::type_complexity)]
    fn candidates<'a>(
        &'a mut self,
        topo: &'a Topology,
    ) -> Result<Box<dyn Iterator<Item = Result<Candidate, SourceError>> + 'a>, SourceError>;
    /// What the last [`Self::candidates`] did not enumerate, when it bounded itself (one line
    /// for the report's warnings: how much was left out, why, and how to ask for it); `None`
    /// when it enumerated everything.
    fn left_out(&self) -> Option<String> {
        None
    }
    /// The schedule used when search is disabled and the cache has nothing: by default the
    /// first candidate.
    fn default_candidate(&mut self, topo: &Topology) -> Result<Candidate, SourceError> {
        let mut it = self.candidates(topo)?;
        loop {
            match it.next() {
                Some(Ok(c)) => return Ok(c),
                Some(Err(_)) => continue,
                None => return Err(SourceError::new("the source produced no candidate")),
            }
        }
    }
}

/// Versions of the machine a profiler runs on (part of the cache key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub device: String,
    pub driver: String,
    pub cuda: String,
    pub nccl: String,
}

impl DeviceInfo {
    /// What the topology file says (or "unknown"), for runs without a GPU.
    pub fn from_topology(topo: &Topology) -> Self {
        let e = &topo.environment;
        let or = |x: &Option<String>| x.clone().unwrap_or_else(|| "unknown".into());
        DeviceInfo {
            device: topo.device.name.clone(),
            driver: or(&e.driver),
            cuda: or(&e.cuda),
            nccl: or(&e.nccl),
        }
    }
}

/// A measurement of one candidate on real hardware.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub latency_s: f64,
    /// Device time the measurement used (all GPUs, warm-up included).
    pub gpu_seconds: f64,
}

/// Progress reporting (the binary draws an indicatif bar; tests use [`NoProgress`]).
pub trait Progress {
    fn start(&mut self, _what: &str, _len: Option<u64>) {}
    fn tick(&mut self, _name: &str) {}
    fn finish(&mut self) {}
}

pub struct NoProgress;
impl Progress for NoProgress {}

/// What happened to one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum Status {
    /// Simulated (and maybe profiled).
    Ranked,
    /// Plan failed verification or simulation.
    Invalid(String),
    /// Needs more HBM than the device has.
    OverMemory(String),
}

impl std::fmt::Display for Status {
    /// `ranked`, `invalid: why` or `over memory: why` (for messages; the JSON is serde's).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Ranked => f.write_str("ranked"),
            Status::Invalid(why) => write!(f, "invalid: {why}"),
            Status::OverMemory(why) => write!(f, "over memory: {why}"),
        }
    }
}

/// A judged candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluated {
    pub candidate: Candidate,
    pub status: Status,
    pub memory: Option<MemoryReport>,
    pub predicted_s: Option<f64>,
    pub measured_s: Option<f64>,
    /// Bytes over each topology level and the exposed-communication fraction (simulated).
    pub tier_bytes: Vec<f64>,
    pub exposed_comm: f64,
    /// The plan's stage count ([`Plan::num_stages`]), kept when its detail is dropped.
    #[serde(default)]
    pub stages: usize,
    /// Whether [`Evaluated::drop_detail`] emptied the candidate's plan ranks and annotated IR
    /// (its name, transform script, mesh and figures stay).
    #[serde(default)]
    pub detail_dropped: bool,
}

impl Evaluated {
    /// Drops what only a chosen, profiled or frontier candidate needs: the plan's ranks and
    /// the annotated IR (a plan of 32 ranks is about a megabyte; a search holds thousands of
    /// candidates). The name, transform script, mesh, stage count and figures stay.
    pub fn drop_detail(&mut self) {
        self.candidate.plan.ranks = Vec::new();
        self.candidate.annotated_ir = String::new();
        self.detail_dropped = true;
    }
    /// The figure ranking uses: measured when profiled, else predicted.
    pub fn latency(&self) -> Option<f64> {
        self.measured_s.or(self.predicted_s)
    }
    pub fn peak_bytes(&self) -> u64 {
        self.memory.as_ref().map(|m| m.peak_bytes).unwrap_or(0)
    }
}

/// Verify, prune by memory, simulate.
pub fn evaluate(c: Candidate, topo: &Topology) -> Evaluated {
    let mut e = Evaluated {
        status: Status::Ranked,
        memory: None,
        predicted_s: None,
        measured_s: None,
        tier_bytes: vec![],
        exposed_comm: 0.0,
        stages: c.plan.num_stages(),
        detail_dropped: false,
        candidate: c,
    };
    if let Err(err) = mercury_plan::verify(&e.candidate.plan) {
        e.status = Status::Invalid(format!("plan does not verify: {err}"));
        return e;
    }
    if e.candidate.plan.num_ranks() > topo.num_devices() {
        e.status = Status::Invalid(format!(
            "plan needs {} devices, topology '{}' has {}",
            e.candidate.plan.num_ranks(),
            topo.name,
            topo.num_devices()
        ));
        return e;
    }
    let mem = memory_report(&e.candidate.plan, topo);
    if !mem.fits {
        e.status = Status::OverMemory(format!(
            "rank {} needs {} of {} usable",
            mem.peak_rank,
            crate::memory::gb(mem.peak_bytes),
            crate::memory::gb(mem.usable_bytes)
        ));
        e.memory = Some(mem);
        return e;
    }
    e.memory = Some(mem);
    match simulate(&e.candidate.plan, topo, SimOptions::default()) {
        // A time the model cannot price (not finite) ranks nothing: the topology's values are
        // checked against physical ranges, so this is a guard, not a path.
        Ok(sim) if !sim.latency.is_finite() => {
            e.status = Status::Invalid(format!(
                "simulation failed: the predicted time is not finite ({}) on topology '{}'",
                sim.latency, topo.name
            ));
        }
        Ok(sim) => {
            e.predicted_s = Some(sim.latency);
            e.exposed_comm = sim.exposed_comm_fraction();
            e.tier_bytes = sim.tier_bytes;
        }
        Err(err) => e.status = Status::Invalid(format!("simulation failed: {err}")),
    }
    e
}

/// Indices of the latency/memory Pareto frontier among ranked candidates, fastest first. When
/// some candidates were measured, only those count (a prediction is not comparable to a
/// measurement).
pub fn pareto_frontier(evals: &[Evaluated]) -> Vec<usize> {
    let measured = evals.iter().any(|e| e.measured_s.is_some());
    let mut pts: Vec<(usize, f64, u64)> = evals
        .iter()
        .enumerate()
        .filter(|(_, e)| e.status == Status::Ranked)
        .filter(|(_, e)| !measured || e.measured_s.is_some())
        .filter_map(|(i, e)| e.latency().map(|l| (i, l, e.peak_bytes())))
        .collect();
    pts.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    let mut best_mem = u64::MAX;
    for (i, _, m) in pts {
        if m < best_mem {
            out.push(i);
            best_mem = m;
        }
    }
    out
}

/// Options of [`tune`].
#[derive(Debug, Clone, Default)]
pub struct TuneOptions {
    /// Profile the best K by prediction when a profiler is available.
    pub profile_top: usize,
    /// When false, never search: cache hit, else the source's default schedule.
    pub no_search: bool,
    pub cache_dir: Option<PathBuf>,
}

/// The cost of tuning, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuningReport {
    pub operator: String,
    pub topology: String,
    pub topology_hash: String,
    /// "hit", "miss", "stale: ...", "corrupt: ...", "disabled".
    pub cache: String,
    /// How the schedule was chosen: "search", "cache", "default (no search)".
    pub decision: String,
    /// Wall time until the first candidate that fits was ranked (or the cache answered).
    pub time_to_first_usable_s: Option<f64>,
    pub total_s: f64,
    pub candidates_seen: usize,
    pub invalid: usize,
    pub pruned_memory: usize,
    pub simulated: usize,
    pub profiled: usize,
    pub gpu_seconds: f64,
    pub warnings: Vec<String>,
    /// Every candidate the generator could not build, with its reason.
    pub source_errors: Vec<String>,
    /// The same, as a count per reason ([`skip_summary`]), most frequent first.
    pub skipped: Vec<(String, usize)>,
    /// What profiling found (`--profile-top`), when it ran.
    pub profile: Option<crate::profile::ProfileReport>,
    /// The schedule cache file of this operator and machine (with `--cache`).
    pub cache_file: Option<String>,
    /// Why the cached schedule is suspect (a run more than 20% slower than its cached
    /// measurement), when it is.
    pub suspect: Option<String>,
}

/// Skipped candidates as a count per reason, most frequent first: the generator's
/// `mesh AxB [roles]: ` prefix is dropped and numbers are written `N`, so that one refusal of
/// the primitives over many meshes counts once.
pub fn skip_summary(errors: &[String]) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for e in errors {
        *counts.entry(skip_reason(e)).or_insert(0) += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The reason [`skip_summary`] counts `error` under: its first line without the generator's
/// `mesh AxB [roles]: ` prefix, numbers written `N`, at most 140 characters.
fn skip_reason(error: &str) -> String {
    let msg = match error.split_once("]: ") {
        Some((head, rest)) if head.starts_with("mesh ") => rest,
        _ => error,
    };
    let line = msg.lines().next().unwrap_or("").trim();
    let mut norm = String::new();
    let mut in_num = false;
    for ch in line.chars() {
        if ch.is_ascii_digit() {
            if !in_num {
                norm.push('N');
            }
            in_num = true;
        } else {
            in_num = false;
            norm.push(ch);
        }
    }
    if norm.chars().count() > 140 {
        norm = norm.chars().take(137).collect::<String>() + "...";
    }
    norm
}

/// How many distinct reasons [`refusal_summary`] lists (the rest are counted together).
const REASONS_LISTED: usize = 5;

/// Every refusal of `errors` summarised for an error message: the count per distinct reason
/// ([`skip_summary`]; the first [`REASONS_LISTED`], the rest counted together), each with its
/// first refusal as it was written (first line, at most 300 characters), one per line.
/// `verb` says what happened to them ("refused", "failed").
pub fn refusal_summary(errors: &[String], verb: &str) -> String {
    let reasons = skip_summary(errors);
    let mut s = format!(
        "{} {verb}, {} distinct reason(s):",
        errors.len(),
        reasons.len()
    );
    for (why, n) in reasons.iter().take(REASONS_LISTED) {
        let first = errors
            .iter()
            .find(|e| skip_reason(e) == *why)
            .and_then(|e| e.lines().next())
            .unwrap_or("");
        let first = if first.chars().count() > 300 {
            first.chars().take(297).collect::<String>() + "..."
        } else {
            first.to_string()
        };
        s += &format!("\n  {n} x {why}\n      e.g. {first}");
    }
    let rest: usize = reasons.iter().skip(REASONS_LISTED).map(|r| r.1).sum();
    if rest > 0 {
        s += &format!(
            "\n  {rest} more {verb} for {} other reason(s)",
            reasons.len() - REASONS_LISTED
        );
    }
    s
}

/// Everything a tuning run decided.
#[derive(Debug, Clone)]
pub struct TuneResult {
    /// All judged candidates, ranked ones first by latency. After a search only the chosen
    /// one, the profiled ones and the frontier hold their plan and annotated IR; the others'
    /// are dropped ([`Evaluated::drop_detail`]).
    pub ranked: Vec<Evaluated>,
    /// Index into `ranked` of the chosen schedule.
    pub chosen: usize,
    /// Indices into `ranked` of the Pareto frontier, fastest first.
    pub frontier: Vec<usize>,
    pub report: TuningReport,
    /// Simulation of the chosen schedule with a timeline.
    pub chosen_sim: Simulation,
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("candidate source failed: {0}")]
    Source(#[from] SourceError),
    #[error("no usable schedule for {operator} on {topology}: {detail}")]
    NoFeasible {
        operator: String,
        topology: String,
        detail: String,
    },
    #[error("simulating the chosen schedule failed: {0}")]
    Sim(#[from] crate::sim::SimError),
    /// Profiling was asked for but there is no device to measure on (exit 2, no fallback).
    #[error("--profile-top: {0}")]
    NoDevice(String),
    /// Every profiled candidate failed its run or its check.
    #[error("--profile-top: no candidate passed its checked run: {0}")]
    ProfileFailed(String),
    /// Profiling stopped part way ([`crate::profile::MeasureError::Stop`]; exit 1).
    #[error("--profile-top: {0}")]
    ProfileStopped(String),
}

impl From<crate::profile::MeasureError> for TuneError {
    /// The errors that end profiling: no device (exit 2) or a stop (exit 1).
    fn from(e: crate::profile::MeasureError) -> Self {
        match e {
            crate::profile::MeasureError::NoDevice(w) => TuneError::NoDevice(w),
            other => TuneError::ProfileStopped(other.to_string()),
        }
    }
}

fn warn(report: &mut TuningReport, msg: String) {
    tracing::warn!("{msg}");
    report.warnings.push(msg);
}

/// The tuning driver: cache lookup, search (or default), profiling of the top K through
/// `measure`, cache store. Never fails on cache problems (they become warnings).
///
/// With `measure` and `opts.profile_top > 0`, a cache hit is measured again: a run more than
/// 20% slower than the cached measurement marks the entry suspect (written to the cache, a
/// warning) and the operator is tuned again. A suspect entry met without `measure` is not
/// used: the model's pick is (a warning says so), and the entry stays suspect until a
/// profiled run replaces it. `profile_top > 0` without `measure` is a warning (the caller
/// decides whether a missing device is an error: `mercury-tune` exits 2).
pub fn tune(
    source: &mut dyn CandidateSource,
    topo: &Topology,
    opts: &TuneOptions,
    mut measure: Option<&mut dyn crate::profile::Measure>,
    progress: &mut dyn Progress,
) -> Result<TuneResult, TuneError> {
    let t0 = Instant::now();
    let info = measure
        .as_ref()
        .map(|p| p.device_info())
        .unwrap_or_else(|| DeviceInfo::from_topology(topo));
    let key = CacheKey::new(topo, &info, &source.signature());
    let mut report = TuningReport {
        operator: source.describe(),
        topology: topo.name.clone(),
        topology_hash: key.topology_hash.clone(),
        cache: "disabled".into(),
        ..Default::default()
    };
    let profiling = opts.profile_top > 0 && measure.is_some();
    // With a suspect cache entry and nothing to measure with: the model's pick, not stored.
    let mut model_fallback = false;
    let cache = opts.cache_dir.as_ref().map(ScheduleCache::new);
    if let Some(cache) = &cache {
        let lookup = CacheVisit {
            cache,
            key: &key,
            topo,
            profiling,
            no_search: opts.no_search,
            t0,
        };
        match lookup.consult(measure.as_deref_mut(), &mut report)? {
            CacheOutcome::Use(ranked) => return finish(ranked, 0, report, topo, t0),
            CacheOutcome::Search { model_fallback: f } => model_fallback = f,
        }
    }
    if opts.no_search {
        if profiling {
            warn(
                &mut report,
                format!(
                    "--profile-top {} profiled nothing: --no-search measures only a cached schedule, and there is no usable one",
                    opts.profile_top
                ),
            );
        }
        return tune_default(source, topo, report, t0);
    }

    report.decision = if model_fallback {
        "search (model's pick: cached entry suspect)".into()
    } else {
        "search".into()
    };
    let keep = (2 * opts.profile_top).max(1);
    let mut evals = rank_candidates(source, topo, &mut report, progress, t0, keep)?;
    let left_out = source.left_out();
    if let Some(w) = &left_out {
        warn(&mut report, w.clone());
    }
    if evals
        .first()
        .map(|e| e.status != Status::Ranked)
        .unwrap_or(true)
    {
        let mut detail = no_feasible_detail(&evals, &report, topo);
        if let Some(w) = left_out {
            detail += &format!("\n  {w}");
        }
        return Err(TuneError::NoFeasible {
            detail,
            operator: report.operator,
            topology: topo.name.clone(),
        });
    }
    if opts.profile_top > 0 && !model_fallback {
        match measure {
            None => warn(
                &mut report,
                format!(
                    "--profile-top {} ignored: no measuring backend",
                    opts.profile_top
                ),
            ),
            Some(m) => profile_ranked(&mut evals, opts.profile_top, m, &mut report, t0)?,
        }
    }
    let mut result = finish(evals, 0, report, topo, t0)?;
    if let (Some(cache), false) = (&cache, model_fallback) {
        let frontier: Vec<CachedSchedule> = result
            .frontier
            .iter()
            .map(|&i| CachedSchedule::from_eval(&result.ranked[i]))
            .collect();
        let chosen = CachedSchedule::from_eval(&result.ranked[result.chosen]);
        if let Err(e) = cache.store(&key, chosen, frontier) {
            // Said, and no entry named: nothing was written.
            let file = result.report.cache_file.take().unwrap_or_default();
            warn(
                &mut result.report,
                format!("could not write the schedule cache entry {file}: {e}"),
            );
        }
    }
    Ok(result)
}

/// What the schedule cache decided for [`tune`].
/// `--no-search` without a usable cached schedule: the source's default candidate, priced.
/// Errors: the default is invalid or over memory (`NoFeasible`).
fn tune_default(
    source: &mut dyn CandidateSource,
    topo: &Topology,
    mut report: TuningReport,
    t0: Instant,
) -> Result<TuneResult, TuneError> {
    let c = source.default_candidate(topo)?;
    let why = if report.cache.starts_with("suspect") {
        "the cached schedule is suspect"
    } else {
        "no usable cached schedule"
    };
    warn(
        &mut report,
        format!("search disabled and {why}: using the default '{}'", c.name),
    );
    let e = evaluate(c, topo);
    report.decision = "default (no search)".into();
    report.candidates_seen = 1;
    match &e.status {
        Status::Ranked => {
            report.simulated = 1;
            report.time_to_first_usable_s = Some(t0.elapsed().as_secs_f64());
        }
        Status::Invalid(w) | Status::OverMemory(w) => {
            return Err(TuneError::NoFeasible {
                operator: report.operator,
                topology: topo.name.clone(),
                detail: format!("default schedule '{}': {w}", e.candidate.name),
            })
        }
    }
    finish(vec![e], 0, report, topo, t0)
}

/// How many candidates [`rank_candidates`] prices between two [`drop_details`].
const DETAIL_BATCH: usize = 32;

/// Prices every candidate `source` yields on `topo`, counting in `report` what was seen,
/// ranked, invalid or over memory (errors of the source are collected and summarised per
/// reason), and returns them ranked ([`sort_ranked`]). Candidates are priced as they come;
/// only the best `keep` by rank and the Pareto frontier keep their plan and annotated IR
/// ([`drop_details`] every [`DETAIL_BATCH`] and at the end), so that memory grows with the
/// number of candidates by their figures alone.
fn rank_candidates(
    source: &mut dyn CandidateSource,
    topo: &Topology,
    report: &mut TuningReport,
    progress: &mut dyn Progress,
    t0: Instant,
    keep: usize,
) -> Result<Vec<Evaluated>, TuneError> {
    let mut evals: Vec<Evaluated> = Vec::new();
    let mut since = 0;
    progress.start("ranking candidates", None);
    for item in source.candidates(topo)? {
        match item {
            Err(e) => report.source_errors.push(e.message),
            Ok(c) => {
                report.candidates_seen += 1;
                progress.tick(&c.name);
                let e = evaluate(c, topo);
                match &e.status {
                    Status::Ranked => {
                        report.simulated += 1;
                        if report.time_to_first_usable_s.is_none() {
                            report.time_to_first_usable_s = Some(t0.elapsed().as_secs_f64());
                        }
                    }
                    Status::Invalid(_) => report.invalid += 1,
                    Status::OverMemory(_) => report.pruned_memory += 1,
                }
                evals.push(e);
                since += 1;
                if since == DETAIL_BATCH {
                    drop_details(&mut evals, keep);
                    since = 0;
                }
            }
        }
    }
    drop_details(&mut evals, keep);
    progress.finish();
    report.skipped = skip_summary(&report.source_errors);
    sort_ranked(&mut evals);
    Ok(evals)
}

/// Why no candidate of `evals` (sorted, none ranked) can be used: none produced, or the
/// counts with the smallest over memory and the first invalid one (each where there is one;
/// a plan refused by the verifier was reported by the size of the smallest plan, as if it were
/// a memory matter, until 2026-12-03).
fn no_feasible_detail(evals: &[Evaluated], report: &TuningReport, topo: &Topology) -> String {
    if evals.is_empty() {
        return format!(
            "the source produced no candidate: {}",
            refusal_summary(&report.source_errors, "refused")
        );
    }
    let smallest = evals
        .iter()
        .filter(|e| matches!(e.status, Status::OverMemory(_)))
        .filter_map(|e| {
            e.memory
                .as_ref()
                .map(|m| (m.peak_bytes, e.candidate.name.clone()))
        })
        .min();
    let invalid = evals
        .iter()
        .find(|e| matches!(e.status, Status::Invalid(_)));
    if smallest.is_none() && invalid.is_some() && report.invalid == evals.len() {
        return format!(
            "all {} candidate(s) are invalid; first: {}",
            evals.len(),
            evals[0].status
        );
    }
    let mut s = format!(
        "{} candidate(s), {} over memory, {} invalid",
        evals.len(),
        report.pruned_memory,
        report.invalid
    );
    if let Some((b, name)) = smallest {
        s += &format!(
            "; the smallest over memory ('{name}') needs {} of {} usable",
            crate::memory::gb(b),
            crate::memory::gb(topo.usable_hbm_bytes())
        );
    }
    if let Some(e) = invalid {
        s += &format!("; first invalid ('{}'): {}", e.candidate.name, e.status);
    }
    s
}

/// Runs the model's `top` best of `evals` through `m` (checked), records what it cost and
/// what failed in `report`, and re-orders `evals`: the profiled candidates by measurement
/// ahead of the unprofiled ones (their predictions are not comparable to measurements).
/// Errors: every profiled candidate failed (`ProfileFailed`), or profiling stopped.
fn profile_ranked(
    evals: &mut [Evaluated],
    top: usize,
    m: &mut dyn crate::profile::Measure,
    report: &mut TuningReport,
    t0: Instant,
) -> Result<(), TuneError> {
    let prof = crate::profile::profile_top(evals, top, m, t0)?;
    report.profiled += prof.rows.iter().filter(|r| r.measured_s.is_some()).count();
    if prof.on_gpu {
        report.gpu_seconds += prof.device_seconds;
    }
    // Failures as the generator writes its refusals (`mesh AxB [roles]: why`), so that
    // [`refusal_summary`] counts them per reason: 180 failures of one kind were 180 warnings and
    // an error of 26 KB (a CPU run over the executor's size limit).
    let failures: Vec<String> = prof
        .rows
        .iter()
        .filter_map(|r| {
            let why = r.failure.as_deref()?;
            Some(match r.name.split_once(": ") {
                Some((mesh, roles)) => format!("{mesh} [{roles}]: {why}"),
                None => format!("{}: {why}", r.name),
            })
        })
        .collect();
    if prof.measured_pick.is_none() {
        return Err(TuneError::ProfileFailed(refusal_summary(
            &failures, "failed",
        )));
    }
    if failures.len() <= REASONS_LISTED {
        for r in prof.rows.iter().filter(|r| r.failure.is_some()) {
            warn(
                report,
                format!(
                    "candidate '{}' dropped: {}",
                    r.name,
                    r.failure.as_deref().unwrap_or("")
                ),
            );
        }
    } else {
        warn(
            report,
            format!(
                "profiled candidates dropped: {}",
                refusal_summary(&failures, "failed their checked run")
            ),
        );
    }
    if let Some(t) = prof.time_to_first_measured_s {
        report.time_to_first_usable_s = Some(t);
    }
    report.profile = Some(prof);
    evals.sort_by(|a, b| {
        let ka = (a.status != Status::Ranked, a.measured_s.is_none());
        let kb = (b.status != Status::Ranked, b.measured_s.is_none());
        ka.cmp(&kb).then(
            a.latency()
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.latency().unwrap_or(f64::INFINITY)),
        )
    });
    Ok(())
}

/// Ranked candidates first, by predicted time in whole nanoseconds (two schedules the model
/// prices alike, such as a ring and its zigzag form, differ only in the rounding of their
/// sums; that must not decide), then by peak memory, then by name: a stable order.
fn sort_ranked(evals: &mut [Evaluated]) {
    evals.sort_by(rank_order);
}

/// The order of [`sort_ranked`].
fn rank_order(a: &Evaluated, b: &Evaluated) -> std::cmp::Ordering {
    let ns = |e: &Evaluated| e.latency().map_or(f64::INFINITY, |s| (s * 1e9).round());
    let ka = a.status != Status::Ranked;
    let kb = b.status != Status::Ranked;
    ka.cmp(&kb)
        .then(ns(a).total_cmp(&ns(b)))
        .then(a.peak_bytes().cmp(&b.peak_bytes()))
        .then(a.candidate.name.cmp(&b.candidate.name))
}

/// Drops the detail ([`Evaluated::drop_detail`]) of every candidate of `evals` (unmeasured)
/// that can no longer be chosen, profiled or on the frontier: all but the best `keep` ranked
/// ones by [`rank_order`] and the Pareto frontier. More candidates only push others out of
/// both (a point off the frontier stays off it), so nothing dropped is needed later.
fn drop_details(evals: &mut [Evaluated], keep: usize) {
    let mut order: Vec<usize> = (0..evals.len())
        .filter(|&i| evals[i].status == Status::Ranked)
        .collect();
    order.sort_by(|&a, &b| rank_order(&evals[a], &evals[b]));
    let mut needed: std::collections::BTreeSet<usize> = order.into_iter().take(keep).collect();
    needed.extend(pareto_frontier(evals));
    for (i, e) in evals.iter_mut().enumerate() {
        if !e.detail_dropped && !needed.contains(&i) {
            e.drop_detail();
        }
    }
}

fn finish(
    ranked: Vec<Evaluated>,
    chosen: usize,
    mut report: TuningReport,
    topo: &Topology,
    t0: Instant,
) -> Result<TuneResult, TuneError> {
    let chosen_sim = simulate(
        &ranked[chosen].candidate.plan,
        topo,
        SimOptions { trace: true },
    )?;
    let frontier = pareto_frontier(&ranked);
    report.total_s = t0.elapsed().as_secs_f64();
    Ok(TuneResult {
        ranked,
        chosen,
        frontier,
        report,
        chosen_sim,
    })
}
