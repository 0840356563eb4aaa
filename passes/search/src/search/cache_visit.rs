//! The schedule cache as [`tune`] consults it: a hit used, measured again, or set aside.

use super::*;

pub(super) enum CacheOutcome {
    /// A usable entry: these candidates (the cached pick first, then its frontier) are the
    /// result.
    Use(Vec<Evaluated>),
    /// Search: nothing usable was cached. `model_fallback`: the entry is suspect and nothing
    /// can measure, so the model's pick is used and not stored.
    Search { model_fallback: bool },
}

/// One lookup of `key` in `cache` by [`tune`]; `profiling`: a measuring backend and
/// `profile_top > 0`; `t0`: when tuning started.
pub(super) struct CacheVisit<'a> {
    pub(super) cache: &'a ScheduleCache,
    pub(super) key: &'a CacheKey,
    pub(super) topo: &'a Topology,
    pub(super) profiling: bool,
    /// `--no-search`: a hit is used or the default schedule is, never a search.
    pub(super) no_search: bool,
    pub(super) t0: Instant,
}

impl CacheVisit<'_> {
    /// Looks the key up and records what happened in `report` (`cache`, `cache_file`,
    /// warnings). A hit that is still usable is measured again when profiling (more than 20%
    /// slower than its cached time: marked suspect in the cache); a hit without a measurement
    /// is tuned again with profiling; a stale, corrupt or missing entry means a search.
    /// Errors: only a measurement that ends profiling (no device, a stop).
    pub(super) fn consult(
        &self,
        measure: Option<&mut (dyn crate::profile::Measure + '_)>,
        report: &mut TuningReport,
    ) -> Result<CacheOutcome, TuneError> {
        let (cache, key, topo) = (self.cache, self.key, self.topo);
        report.cache_file = Some(cache.path_for(key).display().to_string());
        let entry = match cache.lookup(key) {
            CacheLookup::Hit(entry) => entry,
            CacheLookup::Miss => {
                report.cache = "miss".into();
                return Ok(CacheOutcome::Search {
                    model_fallback: false,
                });
            }
            CacheLookup::Stale(why) => {
                report.cache = format!("stale: {why}");
                warn(
                    report,
                    format!("schedule cache entry is stale ({why}); ignoring it"),
                );
                return Ok(CacheOutcome::Search {
                    model_fallback: false,
                });
            }
            CacheLookup::Corrupt(why) => {
                report.cache = format!("corrupt: {why}");
                warn(
                    report,
                    format!("schedule cache entry is corrupt ({why}); ignoring it"),
                );
                return Ok(CacheOutcome::Search {
                    model_fallback: false,
                });
            }
        };
        let mut e = evaluate(entry.chosen.to_candidate(), topo);
        let usable = e.status == Status::Ranked;
        let mut suspect = entry.suspect.clone();
        let unmeasured = usable && self.profiling && entry.chosen.measured_s.is_none();
        let mut unmarked: Option<String> = None;
        let mut mark = |why: &str| {
            if let Err(err) = cache.mark_suspect(key, why) {
                unmarked = Some(format!("could not mark the cache entry suspect: {err}"));
            }
        };
        if let (true, Some(m)) = (
            usable && suspect.is_none() && self.profiling && !unmeasured,
            measure,
        ) {
            // Measure the cached schedule again against its cached time.
            match m.measure(&e.candidate) {
                Ok(now) => {
                    report.gpu_seconds += if m.on_gpu() { now.gpu_seconds } else { 0.0 };
                    report.profiled += 1;
                    if let Some(why) = entry
                        .chosen
                        .measured_s
                        .and_then(|c| crate::profile::suspect(c, now.latency_s))
                    {
                        mark(&why);
                        suspect = Some(why);
                    } else {
                        e.measured_s = Some(now.latency_s);
                    }
                }
                Err(
                    stop @ (crate::profile::MeasureError::NoDevice(_)
                    | crate::profile::MeasureError::Stop(_)),
                ) => return Err(stop.into()),
                Err(err) => {
                    let why = format!("re-measuring it failed: {err}");
                    mark(&why);
                    suspect = Some(why);
                }
            }
        }
        if let Some(w) = unmarked {
            warn(report, w);
        }
        if unmeasured && suspect.is_none() && !self.no_search {
            report.cache = "hit without a measurement: tuning with profiling".into();
            return Ok(CacheOutcome::Search {
                model_fallback: false,
            });
        }
        if usable && suspect.is_none() {
            report.cache = "hit".into();
            report.decision = "cache".into();
            report.time_to_first_usable_s = Some(self.t0.elapsed().as_secs_f64());
            if e.measured_s.is_none() {
                e.measured_s = entry.chosen.measured_s;
            }
            let mut ranked = vec![e];
            for f in &entry.frontier {
                if f.name == entry.chosen.name {
                    continue;
                }
                let mut fe = evaluate(f.to_candidate(), topo);
                fe.measured_s = f.measured_s;
                ranked.push(fe);
            }
            report.candidates_seen = ranked.len();
            report.simulated = ranked.len();
            return Ok(CacheOutcome::Use(ranked));
        }
        let mut model_fallback = false;
        if let Some(why) = suspect {
            let next = if self.no_search {
                "using the default schedule instead (--no-search)"
            } else if self.profiling {
                "tuning again"
            } else {
                model_fallback = true;
                "using the cost model's pick instead (re-tune with --profile-top on the machine)"
            };
            warn(
                report,
                format!(
                    "cached schedule '{}' is suspect: {why}; {next}",
                    entry.chosen.name
                ),
            );
            report.cache = format!("suspect: {why}");
            report.suspect = Some(why);
        } else {
            let msg = format!(
                "cached schedule '{}' no longer usable ({}); searching again",
                entry.chosen.name, e.status
            );
            report.cache = format!("stale: {msg}");
            warn(report, msg);
        }
        Ok(CacheOutcome::Search { model_fallback })
    }
}
