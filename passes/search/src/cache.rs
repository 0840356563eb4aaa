//! On-disk schedule cache.
//!
//! Key: hash of the normalised topology, device name, driver / CUDA / NCCL versions, the
//! compiler version (`CARGO_PKG_VERSION`) and the operator's shape signature. The file name
//! is derived from the *stable* part of the key (topology hash, device, signature), so after
//! a driver or compiler upgrade the old entry is found and reported *stale* instead of
//! silently missing; the search result then overwrites it.
//!
//! File: `{"format": 1, "checksum": "fnv1a64:<hash of the entry's bytes>", "entry": {...}}`. Loading
//! checks the format, the checksum, the key and that the cached plans still verify; any
//! failure is a [`CacheLookup::Corrupt`] or [`CacheLookup::Stale`] answer, never a panic.

use crate::search::{Candidate, DeviceInfo, Evaluated};
use crate::topology::Topology;
use mercury_plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const CACHE_FORMAT: u64 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    pub topology_hash: String,
    pub device: String,
    pub driver: String,
    pub cuda: String,
    pub nccl: String,
    pub compiler: String,
    pub signature: String,
}

impl CacheKey {
    pub fn new(topo: &Topology, info: &DeviceInfo, signature: &str) -> Self {
        CacheKey {
            topology_hash: topo.normalized_hash(),
            device: info.device.clone(),
            driver: info.driver.clone(),
            cuda: info.cuda.clone(),
            nccl: info.nccl.clone(),
            compiler: env!("CARGO_PKG_VERSION").to_string(),
            signature: signature.to_string(),
        }
    }

    /// `<fnv of topology, device, signature>.json`.
    pub fn file_name(&self) -> String {
        let stable = format!(
            "{}\n{}\n{}",
            self.topology_hash, self.device, self.signature
        );
        format!("{:016x}.json", crate::fnv1a64(stable.as_bytes()))
    }

    /// Fields that differ, as `field: cached -> wanted`.
    pub fn diff(&self, wanted: &CacheKey) -> Vec<String> {
        let mut out = Vec::new();
        let pairs = [
            ("topology", &self.topology_hash, &wanted.topology_hash),
            ("device", &self.device, &wanted.device),
            ("driver", &self.driver, &wanted.driver),
            ("cuda", &self.cuda, &wanted.cuda),
            ("nccl", &self.nccl, &wanted.nccl),
            ("compiler", &self.compiler, &wanted.compiler),
            ("signature", &self.signature, &wanted.signature),
        ];
        for (name, a, b) in pairs {
            if a != b {
                out.push(format!("{name}: {a} -> {b}"));
            }
        }
        out
    }
}

/// A schedule as stored: enough to run it again without searching.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedSchedule {
    pub name: String,
    pub transform_script: String,
    pub annotated_ir: String,
    pub plan: Plan,
    pub predicted_s: Option<f64>,
    pub measured_s: Option<f64>,
    pub peak_bytes: u64,
}

impl CachedSchedule {
    pub fn from_eval(e: &Evaluated) -> Self {
        CachedSchedule {
            name: e.candidate.name.clone(),
            transform_script: e.candidate.transform_script.clone(),
            annotated_ir: e.candidate.annotated_ir.clone(),
            plan: e.candidate.plan.clone(),
            predicted_s: e.predicted_s,
            measured_s: e.measured_s,
            peak_bytes: e.peak_bytes(),
        }
    }
    pub fn to_candidate(&self) -> Candidate {
        Candidate {
            name: self.name.clone(),
            transform_script: self.transform_script.clone(),
            annotated_ir: self.annotated_ir.clone(),
            plan: self.plan.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub key: CacheKey,
    pub created_unix: u64,
    pub chosen: CachedSchedule,
    /// The latency/memory frontier (fastest first), for memory-constrained reuse.
    pub frontier: Vec<CachedSchedule>,
    /// Set when a later run of `chosen` came out more than 20% slower than its cached
    /// measurement (link contention, a driver update, another placement): the entry is not
    /// trusted until tuned again. Absent in entries written before this field existed.
    #[serde(default)]
    pub suspect: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CacheLookup {
    Hit(Box<CacheEntry>),
    Miss,
    /// An entry for this operator and machine exists but was made under other versions.
    Stale(String),
    /// The file exists but cannot be trusted.
    Corrupt(String),
}

impl std::fmt::Display for CacheLookup {
    /// What the lookup found, for messages: `a usable entry ('NAME')`, `no entry (no such
    /// file)`, `stale: why`, `corrupt: why` (the reasons name the file where they have one).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheLookup::Hit(e) => write!(f, "a usable entry ('{}')", e.chosen.name),
            CacheLookup::Miss => f.write_str("no entry (no such file)"),
            CacheLookup::Stale(why) => write!(f, "stale: {why}"),
            CacheLookup::Corrupt(why) => write!(f, "corrupt: {why}"),
        }
    }
}

pub struct ScheduleCache {
    dir: PathBuf,
}

impl ScheduleCache {
    pub fn new(dir: impl AsRef<Path>) -> Self {
        ScheduleCache {
            dir: dir.as_ref().to_path_buf(),
        }
    }

    pub fn path_for(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    pub fn lookup(&self, key: &CacheKey) -> CacheLookup {
        let path = self.path_for(key);
        let entry = match read_entry(&path) {
            Ok(e) => e,
            Err(other) => return other,
        };
        let diff = entry.key.diff(key);
        if !diff.is_empty() {
            return CacheLookup::Stale(diff.join(", "));
        }
        CacheLookup::Hit(Box::new(entry))
    }

    /// Writes (atomically: temp file + rename) the entry for `key`.
    pub fn store(
        &self,
        key: &CacheKey,
        chosen: CachedSchedule,
        frontier: Vec<CachedSchedule>,
    ) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let entry = CacheEntry {
            key: key.clone(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            chosen,
            frontier,
            suspect: None,
        };
        self.write(key, &entry)
    }

    /// Marks the entry for `key` suspect with `why` (kept until a new search overwrites it).
    /// `Err` when there is no usable entry to mark.
    pub fn mark_suspect(&self, key: &CacheKey, why: &str) -> std::io::Result<PathBuf> {
        match self.lookup(key) {
            CacheLookup::Hit(mut entry) => {
                entry.suspect = Some(why.to_string());
                self.write(key, &entry)
            }
            other => Err(std::io::Error::other(format!(
                "no usable cache entry to mark suspect: {other}"
            ))),
        }
    }

    /// Writes `entry` as the file for `key`.
    fn write(&self, key: &CacheKey, entry: &CacheEntry) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path_for(key);
        write_entry(&path, entry)?;
        Ok(path)
    }
}

/// Reads the cache file at `path` (format, checksum, plans that verify; not the key): the
/// entry, or the [`CacheLookup`] answer saying why not (`Miss` when there is no file).
pub fn read_entry(path: &Path) -> Result<CacheEntry, CacheLookup> {
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                return Err(CacheLookup::Corrupt(format!(
                    "{}: not UTF-8",
                    path.display()
                )))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(CacheLookup::Miss),
        Err(e) => return Err(CacheLookup::Corrupt(format!("{}: {e}", path.display()))),
    };
    let corrupt = |why: String| CacheLookup::Corrupt(format!("{}: {why}", path.display()));
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Err(corrupt(format!("not JSON: {e}"))),
    };
    match value.get("format").map(|f| (f, f.as_u64())) {
        Some((_, Some(CACHE_FORMAT))) => {}
        Some((_, Some(other))) => {
            return Err(CacheLookup::Stale(format!(
                "cache format {other}, this compiler writes {CACHE_FORMAT}"
            )))
        }
        Some((f, None)) => {
            return Err(corrupt(format!(
                "format {f} is not a format number (this compiler writes {CACHE_FORMAT})"
            )))
        }
        None => return Err(corrupt("no format field".into())),
    }
    // The checksum covers the exact bytes of the entry as stored.
    #[derive(Deserialize)]
    struct Raw<'a> {
        checksum: String,
        #[serde(borrow)]
        entry: &'a serde_json::value::RawValue,
    }
    let raw: Raw = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => return Err(corrupt(format!("no checksum or entry: {e}"))),
    };
    let want = checksum(raw.entry.get());
    if raw.checksum != want {
        return Err(corrupt(format!(
            "checksum {} does not match the contents ({want})",
            raw.checksum
        )));
    }
    let entry: CacheEntry = match serde_json::from_str(raw.entry.get()) {
        Ok(e) => e,
        Err(e) => return Err(corrupt(format!("bad entry: {e}"))),
    };
    for s in std::iter::once(&entry.chosen).chain(entry.frontier.iter()) {
        for (what, t) in [("predicted", s.predicted_s), ("measured", s.measured_s)] {
            if let Some(t) = t.filter(|t| !is_time(*t)) {
                return Err(corrupt(format!(
                    "the {what} time {t:e} s of '{}' is not a time ({TIME_RULE})",
                    s.name
                )));
            }
        }
        if let Err(e) = mercury_plan::verify(&s.plan) {
            return Err(corrupt(format!(
                "cached plan '{}' does not verify: {e}",
                s.name
            )));
        }
    }
    Ok(entry)
}

/// What a cached time must be; an entry with another is corrupt.
const TIME_RULE: &str = "a finite number of seconds above 0 and at most 1e6";

/// A cached predicted or measured time obeys [`TIME_RULE`].
fn is_time(t: f64) -> bool {
    t.is_finite() && t > 0.0 && t <= 1e6
}

/// The device name an entry's measured times carry when `mercury-tune --backend cpu` measured
/// them (the f64 reference executor; `CpuMeasure`). A GPU entry carries the GPU's name.
pub const CPU_DEVICE: &str = "cpu reference executor";

/// Whether a run on `run_device` can be compared with the measured time of `entry`: `Err`
/// saying why not when the entry was measured on another device (a CPU executor's time says
/// nothing about a GPU's, nor one GPU model's about another's). An entry without a measured
/// time compares with nothing and is `Ok`.
///
/// # Errors
/// The entry's `key.device` is not `run_device`.
pub fn comparable(entry: &CacheEntry, run_device: &str) -> Result<(), String> {
    match entry.chosen.measured_s {
        Some(_) if entry.key.device != run_device => Err(format!(
            "the entry's schedule was measured on '{}', this run is on '{run_device}': its time says nothing about this run's (re-tune here, or give an entry measured here)",
            entry.key.device
        )),
        _ => Ok(()),
    }
}

/// Writes `entry` to `path` (atomically: temp file + rename), with its checksum.
pub fn write_entry(path: &Path, entry: &CacheEntry) -> std::io::Result<()> {
    let entry_text = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    let file = format!(
        "{{\"format\":{CACHE_FORMAT},\"checksum\":\"{}\",\"entry\":{entry_text}}}",
        checksum(&entry_text)
    );
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, file)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        // Nothing is left behind when the entry cannot take its place.
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A run of the cached schedule at `path` on `run_device` took `now_s` seconds: when that is
/// more than 20% over the entry's measured time, marks the entry suspect (rewrites the file)
/// and returns why. `Err` when the file is not a usable entry, was measured on another device
/// ([`comparable`]) or cannot be written.
pub fn check_run_against(
    path: &Path,
    now_s: f64,
    run_device: &str,
) -> Result<Option<String>, String> {
    let mut entry = read_entry(path).map_err(|l| l.to_string())?;
    comparable(&entry, run_device)?;
    let Some(cached) = entry.chosen.measured_s else {
        return Ok(None);
    };
    let Some(why) = crate::profile::suspect(cached, now_s) else {
        return Ok(None);
    };
    entry.suspect = Some(why.clone());
    write_entry(path, &entry).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(why))
}

fn checksum(entry_text: &str) -> String {
    format!("fnv1a64:{:016x}", crate::fnv1a64(entry_text.as_bytes()))
}
