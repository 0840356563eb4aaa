//! The tuning driver end to end: search, outputs, schedule cache (hit / stale / corrupt),
//! no-search fallback, profiling hook, infeasible operators, plans given as JSON.

use mercury_search::cache::{CacheKey, CachedSchedule, ScheduleCache};
use mercury_search::commir_source::CommirSource;
use mercury_search::operator::{AttentionShape, OperatorSpec};
use mercury_search::profile::{Measure, MeasureError};
use mercury_search::report::write_outputs;
use mercury_search::search::{
    pareto_frontier, tune, Candidate, CandidateSource, DeviceInfo, Evaluated, Measurement,
    NoProgress, PlanListSource, SourceError, Status, TuneError, TuneOptions,
};
use mercury_search::Topology;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mercury-search-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn topo(n: &str) -> Topology {
    Topology::preset(n).unwrap().unwrap()
}

fn attention(batch: usize, kv: usize, seq: usize) -> OperatorSpec {
    OperatorSpec {
        attention: Some(AttentionShape {
            batch,
            heads: 32,
            kv_heads: kv,
            seq,
            head_dim: 128,
            causal: false,
        }),
        gemm: None,
        devices: None,
    }
}

/// The CommIR generator over `spec`'s operator.
fn source(spec: OperatorSpec) -> CommirSource {
    spec.source().unwrap()
}

/// Counts how often the search asks for candidates.
struct Counting {
    inner: CommirSource,
    calls: Rc<Cell<usize>>,
}

impl CandidateSource for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn signature(&self) -> String {
        self.inner.signature()
    }
    fn candidates<'a>(
        &'a mut self,
        topo: &'a Topology,
    ) -> Result<Box<dyn Iterator<Item = Result<Candidate, SourceError>> + 'a>, SourceError> {
        self.calls.set(self.calls.get() + 1);
        self.inner.candidates(topo)
    }
    fn default_candidate(&mut self, topo: &Topology) -> Result<Candidate, SourceError> {
        self.inner.default_candidate(topo)
    }
}

fn counting(spec: OperatorSpec) -> (Counting, Rc<Cell<usize>>) {
    let calls = Rc::new(Cell::new(0));
    (
        Counting {
            inner: source(spec),
            calls: calls.clone(),
        },
        calls,
    )
}

#[test]
fn search_writes_every_output() {
    let t = topo("h100-2x4");
    let mut src = source(attention(1, 32, 32768));
    let res = tune(&mut src, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap();
    assert_eq!(res.report.decision, "search");
    assert_eq!(res.report.candidates_seen, res.ranked.len());
    assert!(res.report.simulated >= 20);
    assert!(res.report.time_to_first_usable_s.unwrap() <= res.report.total_s);
    // Ranked by predicted latency.
    let lats: Vec<f64> = res.ranked.iter().filter_map(|e| e.latency()).collect();
    assert!(lats.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(res.chosen, 0);
    let dir = tmp("outputs");
    let files = write_outputs(&res, &t, &dir).unwrap();
    for f in [
        "schedule.json",
        "schedule.transform",
        "schedule.plan.json",
        "candidates.json",
        "pareto.json",
        "pareto.svg",
        "tuning-report.json",
        "tuning-report.md",
        "trace.json",
    ] {
        assert!(files.contains(&dir.join(f)), "{f} missing");
    }
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.json")).unwrap()).unwrap();
    let evs = trace["traceEvents"].as_array().unwrap();
    let x = evs.iter().filter(|e| e["ph"] == "X").count();
    assert!(x > 8 * 4, "{x} slices");
    assert!(evs.iter().all(|e| e["pid"].as_u64().unwrap() < 8));
    let pareto: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("pareto.json")).unwrap()).unwrap();
    let front = pareto["frontier"].as_array().unwrap();
    assert!(front.len() >= 2);
    // Faster points on the frontier use more memory.
    for w in front.windows(2) {
        assert!(w[0]["predicted_s"].as_f64() <= w[1]["predicted_s"].as_f64());
        assert!(w[0]["peak_bytes"].as_u64() > w[1]["peak_bytes"].as_u64());
    }
    // Every known template among the ranked candidates has its transform in templates/; a
    // second run into the same folder leaves none of the first run's schedule files behind.
    let templates = |d: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d.join("templates"))
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let first = templates(&dir);
    assert!(
        first
            .iter()
            .any(|f| f.starts_with("mesh_2x4__L0_ring_L1_heads")),
        "{first:?}"
    );
    std::fs::write(
        dir.join("templates").join("stale.transform"),
        "# left over\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("frontier").join("stale.transform"),
        "# left over\n",
    )
    .unwrap();
    write_outputs(&res, &t, &dir).unwrap();
    assert_eq!(templates(&dir), first);
    assert!(!dir.join("frontier").join("stale.transform").exists());
    let svg = std::fs::read_to_string(dir.join("pareto.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<circle").count(), res.report.simulated);
    let plan = mercury_plan::Plan::from_json(
        &std::fs::read_to_string(dir.join("schedule.plan.json")).unwrap(),
    )
    .unwrap();
    mercury_plan::verify(&plan).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_hit_skips_the_search() {
    let t = topo("h100-2x2");
    let cache = tmp("cache-hit");
    let opts = TuneOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    let (mut src, calls) = counting(attention(1, 8, 32768));
    let first = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(first.report.cache, "miss");
    assert_eq!(calls.get(), 1);
    let second = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(second.report.cache, "hit");
    assert_eq!(second.report.decision, "cache");
    assert_eq!(calls.get(), 1, "a hit must not search");
    assert_eq!(
        second.ranked[second.chosen].candidate.name,
        first.ranked[first.chosen].candidate.name
    );
    assert_eq!(second.ranked[0].predicted_s, first.ranked[0].predicted_s);
    // The cached frontier comes back too.
    assert_eq!(second.frontier.len(), first.frontier.len());
    // A different operator shape misses.
    let (mut other, _) = counting(attention(1, 8, 65536));
    let third = tune(&mut other, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(third.report.cache, "miss");
    // Another topology misses as well.
    let fourth = tune(&mut src, &topo("h100-1x4"), &opts, None, &mut NoProgress).unwrap();
    assert_eq!(fourth.report.cache, "miss");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn stale_key_falls_back_to_search_and_refreshes() {
    let t = topo("h100-2x2");
    let cache = tmp("cache-stale");
    let opts = TuneOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    let (mut src, calls) = counting(attention(1, 8, 32768));
    tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    // Rewrite the entry as if it had been made by another compiler / driver.
    let info = DeviceInfo::from_topology(&t);
    let key = CacheKey::new(&t, &info, &src.signature());
    let sc = ScheduleCache::new(&cache);
    let mut old = key.clone();
    old.compiler = "0.0.1-old".into();
    old.driver = "470.00".into();
    let entry = match sc.lookup(&key) {
        mercury_search::cache::CacheLookup::Hit(e) => e,
        other => panic!("{other:?}"),
    };
    sc.store(&old, entry.chosen.clone(), vec![]).unwrap();
    let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert!(
        res.report.cache.starts_with("stale"),
        "{}",
        res.report.cache
    );
    assert!(
        res.report.cache.contains("compiler: 0.0.1-old"),
        "{}",
        res.report.cache
    );
    assert!(res.report.warnings.iter().any(|w| w.contains("stale")));
    assert_eq!(res.report.decision, "search");
    assert_eq!(calls.get(), 2);
    // The search result replaced the stale entry.
    let again = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(again.report.cache, "hit");
    assert_eq!(calls.get(), 2);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn corrupt_cache_files_fall_back_to_search() {
    let t = topo("h100-2x2");
    let cache = tmp("cache-corrupt");
    let opts = TuneOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    let (mut src, calls) = counting(attention(1, 8, 32768));
    tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    let key = CacheKey::new(&t, &DeviceInfo::from_topology(&t), &src.signature());
    let path = ScheduleCache::new(&cache).path_for(&key);
    let good = std::fs::read_to_string(&path).unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("{ not json".into(), "not JSON"),
        (String::new(), "not JSON"),
        // A flipped digit in the predicted latency: the checksum catches it.
        (
            good.replacen("\"predicted_s\":0.0", "\"predicted_s\":0.1", 1),
            "checksum",
        ),
        (
            good.replacen("\"checksum\":", "\"checksun\":", 1),
            "no checksum",
        ),
        (
            good.replacen("\"format\":1", "\"format\":99", 1),
            "cache format 99",
        ),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        assert!(text != good, "case {i} did not change the file");
        std::fs::write(&path, &text).unwrap();
        let before = calls.get();
        let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
        assert!(
            res.report.cache.contains(want),
            "case {i}: {}",
            res.report.cache
        );
        assert!(!res.report.warnings.is_empty());
        assert_eq!(calls.get(), before + 1, "case {i} must search");
    }
    // Binary garbage.
    std::fs::write(&path, [0xffu8, 0xfe, 0x00, 0x80]).unwrap();
    let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert!(
        res.report.cache.starts_with("corrupt"),
        "{}",
        res.report.cache
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn cached_plan_that_no_longer_verifies_is_corrupt() {
    let t = topo("h100-2x2");
    let cache = tmp("cache-badplan");
    let sc = ScheduleCache::new(&cache);
    let mut src = source(attention(1, 8, 32768));
    let key = CacheKey::new(&t, &DeviceInfo::from_topology(&t), &src.signature());
    let mut c = src.default_candidate(&t).unwrap();
    c.plan.ranks[0].stages[1].comm.clear(); // unmatched sends
    let cached = CachedSchedule {
        name: c.name.clone(),
        transform_script: c.transform_script.clone(),
        annotated_ir: String::new(),
        plan: c.plan,
        predicted_s: Some(1.0),
        measured_s: None,
        peak_bytes: 1,
    };
    sc.store(&key, cached, vec![]).unwrap();
    match sc.lookup(&key) {
        l @ mercury_search::cache::CacheLookup::Corrupt(_) => {
            // Messages carry the reason in words, not Rust's Debug form.
            let w = l.to_string();
            assert!(
                w.starts_with("corrupt: ") && w.contains("does not verify"),
                "{w}"
            )
        }
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn no_search_uses_the_cache_or_the_default() {
    let t = topo("h100-2x2");
    let cache = tmp("cache-nosearch");
    let mut opts = TuneOptions {
        cache_dir: Some(cache.clone()),
        no_search: true,
        ..Default::default()
    };
    let (mut src, calls) = counting(attention(1, 8, 32768));
    let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(res.report.decision, "default (no search)");
    assert_eq!(res.ranked[0].candidate.name, "mesh 4: L0=ring");
    assert!(res.report.warnings.iter().any(|w| w.contains("default")));
    // Fill the cache with a search, then --no-search hits it.
    opts.no_search = false;
    let searched = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    opts.no_search = true;
    let n = calls.get();
    let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert_eq!(res.report.decision, "cache");
    assert_eq!(calls.get(), n);
    assert_eq!(
        res.ranked[0].candidate.name,
        searched.ranked[0].candidate.name
    );
    let _ = std::fs::remove_dir_all(&cache);
}

/// Pretends the slowest-predicted of the top K is the fastest on the machine; "tree"
/// candidates fail their run.
struct FakeMeasure {
    calls: usize,
}

impl Measure for FakeMeasure {
    fn describe(&self) -> String {
        "fake".into()
    }
    fn on_gpu(&self) -> bool {
        true
    }
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            device: "NVIDIA H100 80GB HBM3".into(),
            driver: "580.1".into(),
            cuda: "13.0".into(),
            nccl: "2.28.3".into(),
        }
    }
    fn measure(&mut self, c: &Candidate) -> Result<Measurement, MeasureError> {
        self.calls += 1;
        if c.name.contains("tree") {
            return Err(MeasureError::Run("simulated launch failure".into()));
        }
        Ok(Measurement {
            latency_s: 1.0 / (self.calls as f64),
            gpu_seconds: 0.5,
        })
    }
}

#[test]
fn profiling_reranks_the_top_k() {
    let t = topo("h100-2x2");
    let mut src = source(attention(1, 32, 32768));
    let opts = TuneOptions {
        profile_top: 3,
        ..Default::default()
    };
    let mut prof = FakeMeasure { calls: 0 };
    let res = tune(&mut src, &t, &opts, Some(&mut prof), &mut NoProgress).unwrap();
    let p = res.report.profile.clone().expect("profile report");
    let failed = p.rows.iter().filter(|r| r.failure.is_some()).count();
    assert_eq!(prof.calls, 3 + failed);
    assert_eq!(p.failed, failed);
    let measured: Vec<&Evaluated> = res
        .ranked
        .iter()
        .filter(|e| e.measured_s.is_some())
        .collect();
    assert_eq!(measured.len(), 3);
    assert_eq!(res.report.profiled, measured.len());
    assert!((res.report.gpu_seconds - 0.5 * measured.len() as f64).abs() < 1e-12);
    assert!(
        res.ranked[0].measured_s.is_some(),
        "a measured schedule wins"
    );
    let best = measured
        .iter()
        .map(|e| e.measured_s.unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(res.ranked[0].measured_s, Some(best));
    assert_eq!(
        p.measured_pick.as_deref(),
        Some(res.ranked[0].candidate.name.as_str())
    );
    // The fake reverses the model's order: tau is -1 over the measured three.
    assert_eq!(p.kendall_tau, Some(-1.0));
    // Failing candidates are dropped, never chosen.
    for r in p.rows.iter().filter(|r| r.failure.is_some()) {
        let e = res
            .ranked
            .iter()
            .find(|e| e.candidate.name == r.name)
            .unwrap();
        assert!(matches!(e.status, Status::Invalid(ref w) if w.contains("launch failure")));
    }
    // Without a backend the request is a warning, not an error.
    let res = tune(&mut src, &t, &opts, None, &mut NoProgress).unwrap();
    assert!(res
        .report
        .warnings
        .iter()
        .any(|w| w.contains("no measuring backend")));
}

#[test]
fn infeasible_operator_is_a_clear_error() {
    let t = topo("h200-1x8");
    // One-level meshes only (the 4 roles on `[8]`): enough to tell what fits.
    let mut src = source(attention(16, 32, 2 << 20)).with_max_levels(1);
    let err = tune(&mut src, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TuneError::NoFeasible { .. }), "{msg}");
    assert!(
        msg.contains("over memory") && msg.contains("smallest"),
        "{msg}"
    );
    // At batch 4 some schedules fit (Ring) and others do not (Tree): those are pruned
    // unsimulated.
    let mut src = source(attention(4, 8, 2 << 20)).with_max_levels(1);
    let res = tune(&mut src, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap();
    let fits: Vec<&str> = res
        .ranked
        .iter()
        .filter(|e| e.status == Status::Ranked)
        .map(|e| e.candidate.name.as_str())
        .collect();
    assert!(fits.contains(&"mesh 8: L0=ring"), "{fits:?}");
    assert!(!fits.contains(&"mesh 8: L0=tree"), "{fits:?}");
    assert_eq!(
        res.report.pruned_memory,
        res.report.candidates_seen - fits.len()
    );
    assert!(res
        .ranked
        .iter()
        .all(|e| e.predicted_s.is_some() == (e.status == Status::Ranked)));
}

#[test]
fn plans_given_as_json() {
    let t = topo("h100-2x2");
    let mut fx = source(attention(1, 8, 32768));
    let cands: Vec<Candidate> = fx.candidates(&t).unwrap().flatten().take(5).collect();
    let json = serde_json::to_string(&cands).unwrap();
    let mut src = PlanListSource::from_json(&json, "c.json").unwrap();
    let res = tune(&mut src, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap();
    assert_eq!(res.report.candidates_seen, 5);
    // A bare plan works too; a broken plan is reported as invalid, not a crash.
    let mut broken = cands[1].plan.clone();
    for st in &mut broken.ranks[3].stages {
        st.comm.clear();
    }
    let json = serde_json::to_string(&vec![cands[0].plan.clone(), broken]).unwrap();
    let mut src = PlanListSource::from_json(&json, "p.json").unwrap();
    let res = tune(&mut src, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap();
    assert_eq!(res.report.invalid, 1);
    assert!(matches!(res.ranked[1].status, Status::Invalid(ref w) if w.contains("verify")));
    for (text, want) in [
        ("[", "not valid JSON"),
        ("[]", "no plans"),
        ("[{\"name\": 3}]", "not a plan"),
    ] {
        let e = PlanListSource::from_json(text, "x.json").err().unwrap();
        assert!(e.to_string().contains(want), "{e}");
    }
}

#[test]
fn frontier_keeps_only_non_dominated_points() {
    let t = topo("h100-2x2");
    let mut fx = source(attention(1, 8, 32768));
    let c = fx.default_candidate(&t).unwrap();
    let mk = |lat: f64, mem: u64, status: Status| {
        let mut e = mercury_search::search::evaluate(c.clone(), &t);
        e.predicted_s = Some(lat);
        if let Some(m) = e.memory.as_mut() {
            m.peak_bytes = mem;
        }
        e.status = status;
        e
    };
    let evals = vec![
        mk(3.0, 10, Status::Ranked),                // frontier (least memory)
        mk(1.0, 30, Status::Ranked),                // frontier (fastest)
        mk(2.0, 20, Status::Ranked),                // frontier
        mk(2.5, 25, Status::Ranked),                // dominated by (2.0, 20)
        mk(0.5, 5, Status::OverMemory("x".into())), // not ranked
        mk(1.0, 35, Status::Ranked),                // dominated by (1.0, 30)
    ];
    assert_eq!(pareto_frontier(&evals), vec![1, 2, 0]);
}
