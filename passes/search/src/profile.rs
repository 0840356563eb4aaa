//! Profile-guided search: the model's best candidates measured on a machine (paper section 6,
//! "profiling the top-K").
//!
//! [`profile_top`] takes the candidates ranked by the cost model, runs the best ones through a
//! [`Measure`] backend (the CUDA executor in `mercury-tune`, the CPU reference executor in the
//! tests: the loop is the same), drops every candidate whose run fails or whose outputs differ
//! from the single-device reference, and reports the model's ranking error against the
//! measurements ([`ProfileReport`]: Kendall's tau, predicted and measured time of each profiled
//! candidate, whether the model's pick is within 5% of the measured best), the time to the
//! first measured (usable) schedule and the device-seconds spent.
//!
//! [`CpuMeasure`] is the CPU backend: fresh random inputs per candidate, NaN-poisoned slots
//! (the executor's), outputs compared in f64 with the single-device plan's. Its times are CPU
//! times of the f64 reference executor: they exercise the loop, they do not rank GPU schedules.

use crate::search::{Candidate, DeviceInfo, Evaluated, Measurement, Status};
use mercury_plan::Plan;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Why a measurement failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MeasureError {
    /// The candidate ran but its outputs differ from the reference (the candidate is dropped).
    #[error("check failed: {0}")]
    Check(String),
    /// The candidate could not be run (refused by the executor, out of memory, ...; dropped).
    #[error("run failed: {0}")]
    Run(String),
    /// No device to measure on: profiling stops (the caller exits 2, never falls back).
    #[error("{0}")]
    NoDevice(String),
    /// Profiling cannot go on (e.g. a launched process failed where the processes cannot agree
    /// to drop the candidate together): profiling stops and the caller exits 1.
    #[error("profiling stopped: {0}")]
    Stop(String),
}

/// A backend that runs a candidate, checks its outputs against the operator's single-device
/// reference, and times it.
pub trait Measure {
    /// One line for reports, e.g. `cuda: 2 GPUs, peer copies` or `cpu (f64 reference executor)`.
    fn describe(&self) -> String;
    /// Whether the measured device time is GPU time (the report's `gpu_seconds`).
    fn on_gpu(&self) -> bool;
    /// The machine's versions (part of the schedule cache key).
    fn device_info(&self) -> DeviceInfo;
    /// Runs `c` checked; `latency_s` is the median time of one run of the plan, `gpu_seconds`
    /// the device time the whole measurement held (warm-up and reference included, summed
    /// over the devices used).
    fn measure(&mut self, c: &Candidate) -> Result<Measurement, MeasureError>;
}

/// One profiled candidate, in the model's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfiledRow {
    pub name: String,
    /// 1-based rank by the cost model among the candidates that fit.
    pub model_rank: usize,
    pub predicted_s: f64,
    /// `None` when the run or the check failed.
    pub measured_s: Option<f64>,
    /// Why the candidate was dropped.
    pub failure: Option<String>,
    /// The known schedule this candidate is (`crate::templates::template_of`), or `None`: new.
    pub template: Option<String>,
}

/// What profiling found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    /// The measuring backend ([`Measure::describe`]).
    pub backend: String,
    /// How many candidates were asked for (`--profile-top K`).
    pub top: usize,
    pub rows: Vec<ProfiledRow>,
    /// The cost model's first choice.
    pub model_pick: String,
    /// The fastest candidate measured (checked), if any.
    pub measured_pick: Option<String>,
    /// Measured time of the model's pick over the measured best (1.0: the model was right).
    pub model_pick_slowdown: Option<f64>,
    /// Kendall's tau-b between predicted and measured times of the measured candidates (1:
    /// same order, -1: reversed; `None` for fewer than two).
    pub kendall_tau: Option<f64>,
    /// Median of |predicted / measured - 1| over the measured candidates.
    pub median_abs_error: Option<f64>,
    /// Seconds from the start of tuning to the first checked measurement.
    pub time_to_first_measured_s: Option<f64>,
    /// Device time spent measuring (summed over devices); GPU time when the backend is a GPU.
    pub device_seconds: f64,
    pub on_gpu: bool,
    pub failed: usize,
}

impl ProfileReport {
    /// Whether the model's pick measured within `frac` (0.05: 5%) of the measured best.
    pub fn model_pick_within(&self, frac: f64) -> Option<bool> {
        self.model_pick_slowdown.map(|s| s <= 1.0 + frac)
    }
}

/// Kendall's tau-b of two equally long sequences (ties in either count as neither concordant
/// nor discordant); `None` for fewer than two pairs or when one side is constant.
pub fn kendall_tau(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 2 {
        return None;
    }
    let (mut c, mut d, mut tx, mut ty) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        for j in i + 1..n {
            let a = (x[i] - x[j]).signum() * f64::from(x[i] != x[j]);
            let b = (y[i] - y[j]).signum() * f64::from(y[i] != y[j]);
            if a == 0.0 && b == 0.0 {
                continue;
            } else if a == 0.0 {
                tx += 1.0;
            } else if b == 0.0 {
                ty += 1.0;
            } else if a == b {
                c += 1.0;
            } else {
                d += 1.0;
            }
        }
    }
    let den = ((c + d + tx) * (c + d + ty)).sqrt();
    (den > 0.0).then(|| (c - d) / den)
}

/// Measures the best candidates of `evals` (sorted by prediction, ranked ones first) until
/// `top` of them measured and checked, trying at most `2 * top` (a failing candidate is
/// reported in its row, marked [`Status::Invalid`] and dropped). Sets `measured_s` of each
/// measured candidate. `t0` is the start of tuning (for the time to the first usable
/// schedule). Returns `Err` only for [`MeasureError::NoDevice`] and [`MeasureError::Stop`].
pub fn profile_top(
    evals: &mut [Evaluated],
    top: usize,
    measure: &mut dyn Measure,
    t0: Instant,
) -> Result<ProfileReport, MeasureError> {
    let mut rep = ProfileReport {
        backend: measure.describe(),
        top,
        on_gpu: measure.on_gpu(),
        ..Default::default()
    };
    let ranked: Vec<usize> = (0..evals.len())
        .filter(|&i| evals[i].status == Status::Ranked && evals[i].predicted_s.is_some())
        .collect();
    if let Some(&first) = ranked.first() {
        rep.model_pick = evals[first].candidate.name.clone();
    }
    let mut ok = 0;
    for (pos, &i) in ranked.iter().enumerate().take(2 * top) {
        if ok == top {
            break;
        }
        let e = &mut evals[i];
        let mut row = ProfiledRow {
            name: e.candidate.name.clone(),
            model_rank: pos + 1,
            predicted_s: e.predicted_s.unwrap_or(f64::NAN),
            measured_s: None,
            failure: None,
            template: crate::templates::template_of(&e.candidate.name),
        };
        match measure.measure(&e.candidate) {
            Ok(m) => {
                rep.device_seconds += m.gpu_seconds;
                e.measured_s = Some(m.latency_s);
                row.measured_s = Some(m.latency_s);
                ok += 1;
                if rep.time_to_first_measured_s.is_none() {
                    rep.time_to_first_measured_s = Some(t0.elapsed().as_secs_f64());
                }
            }
            Err(stop @ (MeasureError::NoDevice(_) | MeasureError::Stop(_))) => return Err(stop),
            Err(err) => {
                rep.failed += 1;
                e.status = Status::Invalid(format!("profiling: {err}"));
                row.failure = Some(err.to_string());
            }
        }
        rep.rows.push(row);
    }
    let measured: Vec<&ProfiledRow> = rep.rows.iter().filter(|r| r.measured_s.is_some()).collect();
    let best = measured
        .iter()
        .min_by(|a, b| a.measured_s.unwrap().total_cmp(&b.measured_s.unwrap()));
    rep.measured_pick = best.map(|b| b.name.clone());
    if let (Some(b), Some(pick)) = (best, measured.iter().find(|r| r.name == rep.model_pick)) {
        rep.model_pick_slowdown = Some(pick.measured_s.unwrap() / b.measured_s.unwrap());
    }
    let p: Vec<f64> = measured.iter().map(|r| r.predicted_s).collect();
    let m: Vec<f64> = measured.iter().map(|r| r.measured_s.unwrap()).collect();
    rep.kendall_tau = kendall_tau(&p, &m);
    let mut errs: Vec<f64> = p.iter().zip(&m).map(|(a, b)| (a / b - 1.0).abs()).collect();
    errs.sort_by(f64::total_cmp);
    rep.median_abs_error = errs.get(errs.len() / 2).copied();
    Ok(rep)
}

/// Whether a run of `now_s` seconds makes a cached measurement of `cached_s` suspect (more than
/// 20% slower); the message says by how much.
pub fn suspect(cached_s: f64, now_s: f64) -> Option<String> {
    (now_s > 1.2 * cached_s).then(|| {
        format!(
            "measured {now_s:.3e} s now against {cached_s:.3e} s when cached ({:+.0}%, limit +20%)",
            (now_s / cached_s - 1.0) * 100.0
        )
    })
}

/// The rule for the largest relative error a check accepts, written once for every tool that
/// takes one (`--tolerance` of mercury-run and mercury-tune; a clap value parser): a finite
/// number above 0. `nan` or `inf` would pass every check (no error compares above them), and
/// 0 or less would fail every one.
///
/// # Errors
/// A value that is not such a number; the message is the rule.
pub fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
        _ => Err(
            "the tolerance must be a positive finite number (a relative error, e.g. 1e-3)".into(),
        ),
    }
}

/// The CPU backend: the runtime's f64 reference executor runs the candidate and the
/// single-device `reference` on the same fresh random inputs; outputs must agree within
/// `tolerance` (relative, whole outputs). The latency is the median of `iters` runs.
pub struct CpuMeasure {
    pub reference: Plan,
    pub iters: usize,
    /// The largest relative error accepted: a positive finite number ([`parse_tolerance`]).
    pub tolerance: f64,
    /// Seed of the next candidate's inputs (advanced per candidate: every candidate gets fresh
    /// inputs).
    pub seed: u64,
    /// Largest plan (elements over all ranks' slots) the executor is given.
    pub max_elements: usize,
}

impl CpuMeasure {
    /// A CPU backend against `reference` with a time-derived seed, 3 runs, tolerance 1e-9.
    pub fn new(reference: Plan) -> Self {
        CpuMeasure {
            reference,
            iters: 3,
            tolerance: 1e-9,
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64),
            max_elements: 1 << 24,
        }
    }
}

impl Measure for CpuMeasure {
    fn describe(&self) -> String {
        "cpu (f64 reference executor; times are not GPU times)".into()
    }
    fn on_gpu(&self) -> bool {
        false
    }
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            device: crate::cache::CPU_DEVICE.into(),
            driver: "-".into(),
            cuda: "-".into(),
            nccl: "-".into(),
        }
    }
    fn measure(&mut self, c: &Candidate) -> Result<Measurement, MeasureError> {
        use mercury_runtime::cpu::{execute, random_inputs, relative_error};
        let elements: usize = c
            .plan
            .ranks
            .iter()
            .flat_map(|r| &r.slots)
            .map(|s| s.shape.iter().product::<usize>())
            .sum();
        if elements > self.max_elements {
            return Err(MeasureError::Run(format!(
                "the plan holds {elements} elements, over the CPU executor's limit {}",
                self.max_elements
            )));
        }
        self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let inputs = random_inputs(&c.plan, self.seed);
        let t_all = Instant::now();
        let want = execute(&self.reference, &inputs)
            .map_err(|e| MeasureError::Run(format!("reference: {e}")))?;
        let mut times = Vec::new();
        let mut got = None;
        for _ in 0..self.iters.max(1) {
            let t = Instant::now();
            let out = execute(&c.plan, &inputs).map_err(|e| MeasureError::Run(e.to_string()))?;
            times.push(t.elapsed().as_secs_f64());
            got = Some(out);
        }
        let got = got.expect("at least one run");
        let err = relative_error(&got, &want);
        if err.is_nan() || err > self.tolerance {
            return Err(MeasureError::Check(format!(
                "relative error {err:.3e} against the single-device reference (tolerance {:.0e}, seed {})",
                self.tolerance, self.seed
            )));
        }
        times.sort_by(f64::total_cmp);
        Ok(Measurement {
            latency_s: times[times.len() / 2],
            gpu_seconds: t_all.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kendall_tau_known_values() {
        assert_eq!(
            kendall_tau(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]),
            Some(1.0)
        );
        assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // One swapped pair of three: (2 - 1) / 3.
        let t = kendall_tau(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]).unwrap();
        assert!((t - 1.0 / 3.0).abs() < 1e-12, "{t}");
        assert_eq!(kendall_tau(&[1.0], &[1.0]), None);
        assert_eq!(kendall_tau(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn suspect_above_twenty_percent_only() {
        assert!(suspect(1.0, 1.19).is_none());
        let m = suspect(1.0, 1.5).unwrap();
        assert!(m.contains("+50%"), "{m}");
    }
}
