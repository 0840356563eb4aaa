//! Profile-guided search with the CPU executor as the measuring backend (small shapes): the
//! checked runs, the measured pick, the cache with measured times, suspect entries, failing
//! candidates dropped. No timing is asserted: the suspect cases set the cached time far from
//! any real run (1e-12 s or 1e6 s).

use mercury_search::cache::{CacheKey, CacheLookup, CachedSchedule, ScheduleCache};
use mercury_search::commir_source::CommirSource;
use mercury_search::profile::{CpuMeasure, Measure, MeasureError};
use mercury_search::search::{
    tune, Candidate, CandidateSource, DeviceInfo, Measurement, NoProgress, Status, TuneOptions,
};
use mercury_search::Topology;
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mercury-profile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn topo() -> Topology {
    Topology::preset("h200-1x8").unwrap().unwrap()
}

/// examples/small/attention.mlir (4 heads, 256 positions, head dim 16), mesh [8] as declared.
fn small_attention() -> CommirSource {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/small/attention.mlir"
    ))
    .unwrap();
    CommirSource::from_text(&text, "small/attention.mlir", None)
        .unwrap()
        .keep_declared_mesh()
}

/// examples/ag_gemm.mlir at m = n = k = 64, f32.
fn small_gemm() -> CommirSource {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/ag_gemm.mlir"
    ))
    .unwrap()
    .replace("= 8192", "= 64")
    .replace("bf16", "f32");
    CommirSource::from_text(&text, "small/ag_gemm.mlir", None)
        .unwrap()
        .keep_declared_mesh()
}

fn cpu(src: &CommirSource) -> CpuMeasure {
    let mut m = CpuMeasure::new(src.reference_plan().unwrap());
    m.iters = 1;
    m
}

fn key(src: &CommirSource, m: &dyn Measure) -> CacheKey {
    CacheKey::new(&topo(), &m.device_info(), &src.signature())
}

/// Rewrites the cached chosen schedule's measured time.
fn set_cached_time(cache: &PathBuf, key: &CacheKey, secs: f64) {
    let sc = ScheduleCache::new(cache);
    let CacheLookup::Hit(entry) = sc.lookup(key) else {
        panic!("no cache entry")
    };
    let mut chosen = entry.chosen.clone();
    chosen.measured_s = Some(secs);
    sc.store(key, chosen, entry.frontier.clone()).unwrap();
}

#[test]
fn cpu_profiling_checks_picks_and_caches_the_measured_best() {
    for mut src in [small_attention(), small_gemm()] {
        let cache = tmp("pick");
        let mut m = cpu(&src);
        let opts = TuneOptions {
            profile_top: 3,
            cache_dir: Some(cache.clone()),
            ..Default::default()
        };
        let res = tune(&mut src, &topo(), &opts, Some(&mut m), &mut NoProgress).unwrap();
        let p = res.report.profile.clone().expect("profiled");
        assert!(!p.on_gpu);
        assert_eq!(res.report.gpu_seconds, 0.0, "no GPU time on the CPU");
        let measured: Vec<_> = p.rows.iter().filter(|r| r.measured_s.is_some()).collect();
        assert_eq!(measured.len(), 3, "{:?}", p.rows);
        assert_eq!(p.failed, 0, "{:?}", p.rows);
        // The model's first three, in its order.
        assert_eq!(p.rows[0].model_rank, 1);
        assert_eq!(p.rows[0].name, p.model_pick);
        // The pick is the measured best, and it is what the cache holds, with its time.
        let chosen = &res.ranked[res.chosen];
        let best = measured
            .iter()
            .min_by(|a, b| a.measured_s.unwrap().total_cmp(&b.measured_s.unwrap()))
            .unwrap();
        assert_eq!(chosen.candidate.name, best.name);
        assert_eq!(p.measured_pick.as_deref(), Some(best.name.as_str()));
        assert_eq!(chosen.measured_s, best.measured_s);
        assert!(
            res.frontier
                .iter()
                .all(|&i| res.ranked[i].measured_s.is_some()),
            "the frontier mixes predictions with measurements"
        );
        let slow = p.model_pick_slowdown.unwrap();
        assert!(slow >= 1.0, "{slow}");
        let tau = p.kendall_tau.unwrap();
        assert!((-1.0..=1.0).contains(&tau), "{tau}");
        let CacheLookup::Hit(entry) = ScheduleCache::new(&cache).lookup(&key(&src, &m)) else {
            panic!("nothing cached")
        };
        assert_eq!(entry.chosen.name, best.name);
        assert_eq!(entry.chosen.measured_s, best.measured_s);
        assert_eq!(entry.suspect, None);
        let _ = std::fs::remove_dir_all(&cache);
    }
}

#[test]
fn a_slower_run_marks_the_cache_entry_suspect_and_tunes_again() {
    let cache = tmp("suspect");
    let mut src = small_attention();
    let mut m = cpu(&src);
    let k = key(&src, &m);
    let opts = TuneOptions {
        profile_top: 2,
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    tune(&mut src, &topo(), &opts, Some(&mut m), &mut NoProgress).unwrap();
    // A cached time no run can beat by 20%: a hit, measured again, not suspect.
    set_cached_time(&cache, &k, 1e6);
    let res = tune(&mut src, &topo(), &opts, Some(&mut m), &mut NoProgress).unwrap();
    assert_eq!(res.report.decision, "cache");
    assert_eq!(
        res.report.profiled, 1,
        "the cached schedule is measured again"
    );
    assert!(res.report.suspect.is_none());
    // A cached time every run exceeds by far more than 20%: suspect, tuned again.
    set_cached_time(&cache, &k, 1e-12);
    let res = tune(&mut src, &topo(), &opts, Some(&mut m), &mut NoProgress).unwrap();
    assert_eq!(res.report.decision, "search");
    let why = res.report.suspect.clone().expect("suspect");
    assert!(why.contains("limit +20%"), "{why}");
    assert!(res
        .report
        .warnings
        .iter()
        .any(|w| w.contains("is suspect") && w.contains("tuning again")));
    // The new search replaced the entry: measured, not suspect.
    let CacheLookup::Hit(entry) = ScheduleCache::new(&cache).lookup(&k) else {
        panic!()
    };
    assert!(entry.suspect.is_none() && entry.chosen.measured_s.is_some());
    // Marked suspect and nothing to measure with: the model's pick, the entry left alone.
    ScheduleCache::new(&cache)
        .mark_suspect(&k, "test: 50% slower")
        .unwrap();
    let opts_model = TuneOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    // Same key as the profiled runs: the CPU backend's device info.
    let mut fake = DeviceOnly(m.device_info());
    let res = tune(
        &mut src,
        &topo(),
        &opts_model,
        Some(&mut fake),
        &mut NoProgress,
    )
    .unwrap();
    assert!(
        res.report.decision.contains("model's pick"),
        "{}",
        res.report.decision
    );
    assert!(res.ranked[res.chosen].measured_s.is_none());
    assert!(res
        .report
        .warnings
        .iter()
        .any(|w| w.contains("suspect") && w.contains("cost model's pick")));
    let CacheLookup::Hit(entry) = ScheduleCache::new(&cache).lookup(&k) else {
        panic!()
    };
    assert_eq!(entry.suspect.as_deref(), Some("test: 50% slower"));
    let _ = std::fs::remove_dir_all(&cache);
}

/// A backend that only names the machine (never asked to measure: profile_top = 0).
struct DeviceOnly(DeviceInfo);

impl Measure for DeviceOnly {
    fn describe(&self) -> String {
        "none".into()
    }
    fn on_gpu(&self) -> bool {
        false
    }
    fn device_info(&self) -> DeviceInfo {
        self.0.clone()
    }
    fn measure(&mut self, _: &Candidate) -> Result<Measurement, MeasureError> {
        panic!("not asked to measure")
    }
}

/// The CPU backend on a candidate whose plan lost the transfers of one stage: the check (or the
/// plan verifier) fails, the candidate is dropped and the next one measured instead.
struct Breaking {
    inner: CpuMeasure,
    victim: String,
}

impl Measure for Breaking {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn on_gpu(&self) -> bool {
        false
    }
    fn device_info(&self) -> DeviceInfo {
        self.inner.device_info()
    }
    fn measure(&mut self, c: &Candidate) -> Result<Measurement, MeasureError> {
        if c.name != self.victim {
            return self.inner.measure(c);
        }
        let mut broken = c.clone();
        for r in &mut broken.plan.ranks {
            for st in &mut r.stages {
                if !st.comm.is_empty() {
                    st.comm.clear();
                    break;
                }
            }
        }
        self.inner.measure(&broken)
    }
}

#[test]
fn a_candidate_failing_its_checked_run_is_dropped() {
    let mut src = small_attention();
    // The model's pick is the victim.
    let first = tune(
        &mut src,
        &topo(),
        &TuneOptions::default(),
        None,
        &mut NoProgress,
    )
    .unwrap();
    let victim = first.ranked[0].candidate.name.clone();
    assert!(first.ranked[0].candidate.plan.ranks[0]
        .stages
        .iter()
        .any(|s| !s.comm.is_empty()));
    let mut m = Breaking {
        inner: cpu(&src),
        victim: victim.clone(),
    };
    let opts = TuneOptions {
        profile_top: 2,
        ..Default::default()
    };
    let res = tune(&mut src, &topo(), &opts, Some(&mut m), &mut NoProgress).unwrap();
    let p = res.report.profile.clone().unwrap();
    assert_eq!(p.failed, 1);
    assert_eq!(p.rows[0].name, victim);
    assert!(p.rows[0].failure.is_some());
    assert_eq!(p.rows.iter().filter(|r| r.measured_s.is_some()).count(), 2);
    assert_ne!(res.ranked[res.chosen].candidate.name, victim);
    assert!(
        p.model_pick_slowdown.is_none(),
        "the model's pick has no time"
    );
    let e = res
        .ranked
        .iter()
        .find(|e| e.candidate.name == victim)
        .unwrap();
    assert!(matches!(e.status, Status::Invalid(ref w) if w.starts_with("profiling")));
    assert!(res
        .report
        .warnings
        .iter()
        .any(|w| w.contains(&victim) && w.contains("dropped")));
}

/// The search grows past one role per level: shift-reduce of partial outputs, two roles in one
/// level, zigzag placements on causal attention; the skipped ones are summarised by reason.
#[test]
fn new_roles_are_candidates_and_skips_are_summarised() {
    let t = topo();
    let mut g = small_gemm();
    let names: Vec<String> = g
        .candidates(&t)
        .unwrap()
        .flatten()
        .map(|c| c.name)
        .collect();
    assert!(
        names.iter().any(|n| n == "mesh 8: L0=n+ring(m)"),
        "{names:?}"
    );
    let combined = names
        .iter()
        .filter(|n| n.contains("ring(k)") || n.contains("ring(n)") || n.contains("shift(n)"))
        .count();
    assert!(combined >= 1, "{names:?}");
    let res = tune(&mut g, &t, &TuneOptions::default(), None, &mut NoProgress).unwrap();
    let seen: usize = res.report.skipped.iter().map(|s| s.1).sum();
    assert_eq!(seen, res.report.source_errors.len());
    assert!(res.report.skipped.len() <= res.report.source_errors.len());
}

/// A candidate's transform applies to the operator as given: with the declared mesh it has no
/// `reshape-mesh`; with a re-factored one it starts with it. Both lower to the candidate's plan.
#[test]
fn transforms_apply_to_the_input_as_given() {
    let t = Topology::preset("h100-2x4").unwrap().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/small/attention.mlir"
    ))
    .unwrap();
    let kept = CommirSource::from_text(&text, "a.mlir", None)
        .unwrap()
        .keep_declared_mesh();
    let mut all = CommirSource::from_text(&text, "a.mlir", None).unwrap();
    let mut kept = kept;
    let k: Vec<Candidate> = kept.candidates(&t).unwrap().flatten().collect();
    assert!(k.iter().all(|c| c.name.starts_with("mesh 8:")));
    assert!(k
        .iter()
        .all(|c| !c.transform_script.contains("reshape-mesh")));
    let a: Vec<Candidate> = all.candidates(&t).unwrap().flatten().collect();
    let two = a
        .iter()
        .find(|c| c.name == "mesh 2x4: L0=ring L1=heads")
        .expect("usp candidate");
    assert!(two
        .transform_script
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .starts_with("reshape-mesh{shape=2x4}"));
    for c in [&k[0], two] {
        let again = all.scheduled(&c.name, &c.transform_script, None).unwrap();
        assert_eq!(again.plan, c.plan, "{}", c.name);
    }
    // Declared mesh against a topology of another size: refused, with the way out.
    let four = Topology::preset("h100-1x4").unwrap().unwrap();
    let e = kept.candidates(&four).err().unwrap();
    assert!(e.to_string().contains("--refactor-mesh"), "{e}");
}

#[test]
fn cache_entries_written_before_suspect_existed_still_load() {
    let cache = tmp("old");
    let mut src = small_attention();
    let m = cpu(&src);
    let k = key(&src, &m);
    let c = src.default_candidate(&topo()).unwrap();
    let sc = ScheduleCache::new(&cache);
    let path = sc
        .store(
            &k,
            CachedSchedule {
                name: c.name.clone(),
                transform_script: c.transform_script.clone(),
                annotated_ir: String::new(),
                plan: c.plan.clone(),
                predicted_s: Some(1.0),
                measured_s: Some(2e-3),
                peak_bytes: 1,
            },
            vec![],
        )
        .unwrap();
    // The file as the previous version wrote it: no `suspect` field, its own checksum.
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("\"entry\":").unwrap() + "\"entry\":".len();
    let entry = text[start..text.len() - 1].replace(",\"suspect\":null", "");
    assert!(!entry.contains("suspect"));
    let old = format!(
        "{{\"format\":1,\"checksum\":\"fnv1a64:{:016x}\",\"entry\":{entry}}}",
        mercury_search::fnv1a64(entry.as_bytes())
    );
    std::fs::write(&path, old).unwrap();
    match sc.lookup(&k) {
        CacheLookup::Hit(e) => {
            assert_eq!(e.suspect, None);
            assert_eq!(e.chosen.measured_s, Some(2e-3));
        }
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// Every candidate with a role new to the search (shift-reduce of attention's partial outputs,
/// two roles in one level) computes the operator: the CPU executor against the single-device
/// reference on fresh inputs.
#[test]
fn new_role_candidates_compute_the_operator() {
    let t = topo();
    let mut checked = Vec::new();
    for mut src in [small_attention(), small_gemm()] {
        let mut m = cpu(&src);
        let cands: Vec<Candidate> = src.candidates(&t).unwrap().flatten().collect();
        for c in cands.iter().filter(|c| {
            c.name.contains("tree+shift(i)")
                || c.name.contains("m+ring(")
                || c.name.contains("(k)")
                || c.name.contains("shift(n)")
        }) {
            m.measure(c).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            checked.push(c.name.clone());
        }
    }
    for want in ["mesh 8: L0=tree+shift(i)", "mesh 8: L0=m+ring(n)"] {
        assert!(
            checked.iter().any(|n| n == want),
            "{want} not among {checked:?}"
        );
    }
}

/// Grouped-query attention with fewer key/value heads (2) than ranks (8): the generator tries
/// K/V head replication (`groups`: the query heads of each group split over a level, each
/// key/value head replicated over it), and every such candidate computes the single-device
/// result on the f64 CPU executor. Multi-head attention gets no such candidate.
#[test]
fn kv_head_replication_candidates_are_generated_and_check_on_the_cpu() {
    let text = "commir.mesh @mesh shape [8] names [\"gpu\"]
commir.kernel @attention_gqa on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @hk = 2 spatial
  commir.axis @g = 4 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @hk * @g, @i, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, 8] f32 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, 8] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<f32>
  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {causal = false} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}
";
    let mut src = CommirSource::from_text(text, "gqa_kv2.mlir", None).unwrap();
    let mut m = cpu(&src);
    let topo = topo();
    let replicated: Vec<Candidate> = src
        .candidates(&topo)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|c| c.name.contains("groups"))
        .collect();
    let names: Vec<&str> = replicated.iter().map(|c| c.name.as_str()).collect();
    // Ulysses with K/V heads replicated: the 2 key/value heads over a level of 2, the 4
    // query heads of each group over a level of 4.
    assert!(
        names.contains(&"mesh 2x4: L0=heads L1=groups"),
        "replication candidates: {names:?}"
    );
    // Never more than one key/value head per rank beside a groups level.
    assert!(!names.iter().any(|n| n.starts_with("mesh 8:")), "{names:?}");
    for c in &replicated {
        m.measure(c)
            .unwrap_or_else(|e| panic!("{}: {e:?}\n{}", c.name, c.transform_script));
    }
    let mut mha = small_attention();
    assert!(!mha
        .candidates(&topo)
        .unwrap()
        .filter_map(Result::ok)
        .any(|c| c.name.contains("groups")));
}

/// Causal attention whose inputs and output are declared zigzag (torch context parallelism's
/// load-balanced contract): the head-parallel candidates end in the declared zigzag placement
/// (they were refused when they ended contiguous), and compute the single-device result.
#[test]
fn head_parallel_candidates_keep_a_zigzag_output() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/small/attention.mlir"
    ))
    .unwrap()
    .replace("causal = false", "causal = true")
    .replace("S(0)", "S(zigzag(0))")
    .replace("@h = 4", "@h = 8");
    let mut src = CommirSource::from_text(&text, "zigzag.mlir", None)
        .unwrap()
        .keep_declared_mesh();
    let mut m = cpu(&src);
    let heads: Vec<Candidate> = src
        .candidates(&topo())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|c| c.name.starts_with("mesh 8: L0=heads"))
        .collect();
    assert!(!heads.is_empty(), "no head-parallel candidate");
    for c in &heads {
        assert!(
            c.transform_script
                .contains("reshard{buffer=O sharding=R,R,S(zigzag(0)),R at=end}"),
            "{}",
            c.transform_script
        );
        m.measure(c)
            .unwrap_or_else(|e| panic!("{}: {e:?}\n{}", c.name, c.transform_script));
    }
}
