//! Machine descriptions: mesh levels (slowest first) with their links, and the device's
//! capacities and measured rates. The TOML format is documented in `docs/topology.md`.
//!
//! Physical devices are numbered row-major over the level sizes (node-major), exactly like the
//! ranks of a [`mercury_plan::Plan`]; a plan's rank `r` runs on device `r` whatever the plan's
//! own mesh factorisation is. Two devices talk over the links of the *slowest* level at which
//! their coordinates differ (their *tier*).

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One level of the machine hierarchy (e.g. nodes, GPUs in a node).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level {
    pub name: String,
    /// Number of children at this level (nodes per cluster, GPUs per node...). At least 1.
    pub size: usize,
    /// Free text: what the link is (informational only).
    #[serde(default)]
    pub link: String,
    /// Datasheet bandwidth of one port, GB/s (1e9 bytes) per direction.
    pub bandwidth_gbs: f64,
    /// Fraction of `bandwidth_gbs` transfers reach (0 < efficiency <= 1); default 1.
    #[serde(default = "one")]
    pub efficiency: f64,
    /// Latency of one message over this level, microseconds.
    pub latency_us: f64,
    /// Ports (NICs, NVLink egress) per *unit* of this level. A unit is the set of devices that
    /// share all coordinates up to and including this level (for the node level: the GPUs of
    /// one node). Devices are spread over the ports round-robin; transfers through one port
    /// share its bandwidth. Default: one port per device (no sharing).
    #[serde(default)]
    pub ports: Option<usize>,
}

/// Measured (or estimated) throughput of the local patches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    /// bf16 GEMM, TFLOP/s, counting 2*m*n*k.
    pub gemm_tflops: f64,
    /// bf16 attention forward, TFLOP/s, counting 4*b*h*sq*sk*d visible FLOPs.
    pub attention_tflops: f64,
    /// Same for causal tiles (per *visible* FLOP); defaults to `attention_tflops`.
    #[serde(default)]
    pub attention_causal_tflops: Option<f64>,
    /// Measured GEMM rates by shape (`mercury-mgpu links --measure-rates`): a GEMM is priced
    /// at the rate of the nearest point ([`Topology::gemm_rate_for`]); without points, at
    /// `gemm_tflops`. TOML: `[[device.rates.gemm_points]]` tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gemm_points: Vec<GemmPoint>,
    /// Measured attention rates by shape, the same way ([`Topology::attention_rate_for`]);
    /// TOML: `[[device.rates.attention_points]]` tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention_points: Vec<AttentionPoint>,
}

/// One measured GEMM: `out[m, n] (+)= a[m, k] b[k, n]`, bf16 operands, f32 accumulator (the
/// form the executor runs for tiles that accumulate), TFLOP/s counting `2 m n k`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmPoint {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub tflops: f64,
}

/// One measured attention forward call: q `[1, heads, sq, d]`, k/v `[1, heads, sk, d]`, bf16,
/// the causal mask on the diagonal (`causal`, query i sees keys `<= i`) or none; TFLOP/s per
/// visible FLOP (`4 heads d visible`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionPoint {
    /// Batch x query heads of the measured call.
    pub heads: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub causal: bool,
    pub tflops: f64,
}

/// Distance of two shapes in octaves: the sum over dimensions of `|log2(a / b)|`.
fn octaves(a: &[usize], b: &[usize]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| ((x.max(1) as f64) / (y.max(1) as f64)).log2().abs())
        .sum()
}

/// The physical ranges a topology's values must lie in (`Topology::validate`): wide enough for
/// any machine (a slow NIC to a future GPU), narrow enough that a typo cannot give the model
/// infinite or absurd times. Capacity, GB.
pub const RANGE_GB: (f64, f64, &str) = (1e-3, 1e6, "GB");
/// Bandwidths (HBM, links), GB/s.
pub const RANGE_GBS: (f64, f64, &str) = (1e-3, 1e6, "GB/s");
/// Compute rates, TFLOP/s.
pub const RANGE_TFLOPS: (f64, f64, &str) = (1e-6, 1e6, "TFLOP/s");
/// Latencies and launch overheads, at most 10 s (microseconds).
pub const MAX_LATENCY_US: f64 = 1e7;
/// A link's efficiency, at least this fraction of its bandwidth.
pub const MIN_EFFICIENCY: f64 = 1e-3;
/// SMs and copy engines per device, at most.
pub const MAX_COUNT: usize = 1 << 20;

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    /// HBM capacity, GB (1e9 bytes).
    pub hbm_gb: f64,
    /// HBM kept back for the CUDA context, NCCL buffers, library workspaces; GB. Default 0.
    #[serde(default)]
    pub hbm_reserved_gb: f64,
    /// Effective HBM bandwidth counting read + write bytes, GB/s.
    pub hbm_bandwidth_gbs: f64,
    /// Asynchronous copy engines: point-to-point sends in flight per device at once.
    pub copy_engines: usize,
    /// Streaming multiprocessors; with 0 no wave-quantisation of small kernels is modelled.
    #[serde(default)]
    pub sm_count: usize,
    /// Fixed cost of one kernel launch / collective call, microseconds. Default 5.
    #[serde(default = "five")]
    pub launch_overhead_us: f64,
    pub rates: Rates,
}

/// Software versions that belong to the schedule cache key (optional in files).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    #[serde(default)]
    pub driver: Option<String>,
    #[serde(default)]
    pub cuda: Option<String>,
    #[serde(default)]
    pub nccl: Option<String>,
}

/// A machine: mesh levels slowest first, one device kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub device: DeviceSpec,
    #[serde(default)]
    pub environment: Environment,
    pub levels: Vec<Level>,
}

fn one() -> f64 {
    1.0
}
fn five() -> f64 {
    5.0
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read topology file '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: not a valid topology file: {message}")]
    Parse { origin: String, message: String },
    /// An error at a place in the file, with the source line and a caret (tools print it as
    /// it stands): a TOML error (`file:line:col: error: not a valid topology file: ...`) or a
    /// value the checks refuse, at that value (`file:line:col: error: levels[1] ('gpu'):
    /// ...`).
    #[error("{}", .0.render().trim_end())]
    Located(mercury_ir::Diagnostic),
    /// `hint` is empty or ` (did you mean '...'?)` (a preset of a similar name, or the file
    /// `topologies/<name>.toml` under the working directory).
    #[error("'{name}' is neither a topology preset nor a readable file{hint}; presets: {list}")]
    Unknown {
        name: String,
        hint: String,
        list: String,
    },
}

/// One step of the path to a value in a topology file: a key, or an index into an array (of
/// tables): `levels[1].size` is `[Key("levels"), Index(1), Key("size")]`.
#[derive(Debug, Clone, Copy)]
enum Seg {
    Key(&'static str),
    Index(usize),
}

/// A value [`Topology::validate`] refuses: the message, the path to the value, and a second
/// place for a note (the other level of a pair).
#[derive(Debug)]
struct Invalid {
    message: String,
    at: Vec<Seg>,
    note: Option<(Vec<Seg>, String)>,
}

impl Invalid {
    fn new(at: Vec<Seg>, message: String) -> Invalid {
        Invalid {
            message,
            at,
            note: None,
        }
    }

    fn with_note(mut self, at: Vec<Seg>, message: String) -> Invalid {
        self.note = Some((at, message));
        self
    }

    /// The error located in `text` (the file the topology was read from, named `origin`): at
    /// the value its path names, or the nearest enclosing table the file spells out when the
    /// value is not written in it (a default); at the start of the file when nothing is.
    fn diagnostic(&self, origin: &str, text: &str) -> mercury_ir::Diagnostic {
        let file = mercury_ir::SourceFile::new(origin, text);
        let doc = toml_edit::ImDocument::parse(text).ok();
        let at =
            |path: &[Seg]| file.location(doc.as_ref().map_or(0, |d| offset(d.as_item(), path)));
        let d = mercury_ir::Diagnostic::error(at(&self.at), self.message.clone());
        match &self.note {
            Some((path, m)) => d.with_note(at(path), m.clone()),
            None => d,
        }
    }
}

/// The byte offset in the parsed file of the deepest item along `path` that has a place (a
/// value, a table's header); 0 when none does.
fn offset(root: &toml_edit::Item, path: &[Seg]) -> usize {
    let mut item = root;
    let mut best = 0;
    for s in path {
        let next = match *s {
            Seg::Key(k) => item.get(k),
            Seg::Index(i) => item.get(i),
        };
        let Some(next) = next else { break };
        if let Some(span) = next.span() {
            best = span.start;
        }
        item = next;
    }
    best
}

/// Presets embedded in the binary (also in `topologies/*.toml`).
pub const PRESETS: &[(&str, &str)] = &[
    (
        "h100-1x4",
        include_str!("../../../topologies/h100-1x4.toml"),
    ),
    (
        "h100-2x2",
        include_str!("../../../topologies/h100-2x2.toml"),
    ),
    (
        "h100-4x1",
        include_str!("../../../topologies/h100-4x1.toml"),
    ),
    (
        "h100-1x8",
        include_str!("../../../topologies/h100-1x8.toml"),
    ),
    (
        "h100-2x4",
        include_str!("../../../topologies/h100-2x4.toml"),
    ),
    (
        "h100-4x2",
        include_str!("../../../topologies/h100-4x2.toml"),
    ),
    (
        "h100-4x4",
        include_str!("../../../topologies/h100-4x4.toml"),
    ),
    (
        "h100-2x8",
        include_str!("../../../topologies/h100-2x8.toml"),
    ),
    (
        "a100-2x4",
        include_str!("../../../topologies/a100-2x4.toml"),
    ),
    ("l4-2x4", include_str!("../../../topologies/l4-2x4.toml")),
    (
        "h200-1x8",
        include_str!("../../../topologies/h200-1x8.toml"),
    ),
];

/// A link port: transfers through the same port share its bandwidth (per direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port {
    pub level: usize,
    /// Index of the unit (devices sharing coordinates `0..=level`), row-major.
    pub unit: usize,
    pub port: usize,
}

impl Topology {
    /// Parses and validates TOML text; `origin` names the source in error messages.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Topology, TopologyError> {
        let topo: Topology = toml::from_str(text).map_err(|e| {
            match crate::toml_diagnostic(&e, origin, text, "topology file") {
                Ok(d) => TopologyError::Located(d),
                Err(_) => TopologyError::Parse {
                    origin: origin.to_string(),
                    message: e.message().trim_end().to_string(),
                },
            }
        })?;
        topo.check()
            .map_err(|e| TopologyError::Located(e.diagnostic(origin, text)))?;
        Ok(topo)
    }

    pub fn from_file(path: &Path) -> Result<Topology, TopologyError> {
        let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Topology::from_toml_str(&text, &path.display().to_string())
    }

    /// An embedded preset by name.
    pub fn preset(name: &str) -> Option<Result<Topology, TopologyError>> {
        PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, text)| Topology::from_toml_str(text, &format!("preset {n}")))
    }

    pub fn preset_names() -> Vec<&'static str> {
        PRESETS.iter().map(|(n, _)| *n).collect()
    }

    /// A preset name, or else a path to a TOML file. Nothing else is looked up: a bare name
    /// that is neither (`h200-1x2-measured`, the stem of a file in `topologies/` that is not
    /// embedded) is refused with the path to give when `topologies/<name>.toml` exists under
    /// the working directory, or with the preset it is a typo of.
    pub fn load(spec: &str) -> Result<Topology, TopologyError> {
        if let Some(t) = Topology::preset(spec) {
            return t;
        }
        let path = Path::new(spec);
        if path.is_file() {
            return Topology::from_file(path);
        }
        let file = if spec.ends_with(".toml") {
            spec.to_string()
        } else {
            format!("{spec}.toml")
        };
        let in_dir = Path::new("topologies").join(&file);
        let names = Topology::preset_names();
        let hint = if !spec.contains('/') && in_dir.is_file() {
            format!(" (did you mean '{}'?)", in_dir.display())
        } else {
            mercury_ir::pass::did_you_mean(spec, names.iter().copied())
                .map(|p| format!(" (did you mean '{p}'?)"))
                .unwrap_or_default()
        };
        Err(TopologyError::Unknown {
            name: spec.to_string(),
            hint,
            list: names.join(", "),
        })
    }

    /// Checks the description; returns a message naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        self.check().map_err(|e| e.message)
    }

    /// [`Topology::validate`], with the place in the file of what is wrong.
    fn check(&self) -> Result<(), Invalid> {
        use Seg::{Index as I, Key as K};
        let bad = |at: Vec<Seg>, message: String| Err(Invalid::new(at, message));
        if self.name.trim().is_empty() {
            return bad(vec![K("name")], "`name` is empty".into());
        }
        let d = &self.device;
        let positive = |at: Vec<Seg>, field: &str, v: f64| -> Result<(), Invalid> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                bad(at, format!("`{field}` must be a positive number, got {v}"))
            }
        };
        // A positive value inside the physical range [lo, hi] (`unit` for the message): a
        // rate or size outside it is a typo, and gives the model infinite or absurd times.
        let within = |at: Vec<Seg>, field: &str, v: f64, (lo, hi, unit): (f64, f64, &str)| {
            positive(at.clone(), field, v)?;
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                bad(
                    at,
                    format!(
                        "`{field}` = {v:e} is outside the physical range [{lo:e}, {hi:e}] {unit}"
                    ),
                )
            }
        };
        let dev = |k: &'static str| vec![K("device"), K(k)];
        let rate = |k: &'static str| vec![K("device"), K("rates"), K(k)];
        within(dev("hbm_gb"), "device.hbm_gb", d.hbm_gb, RANGE_GB)?;
        within(
            dev("hbm_bandwidth_gbs"),
            "device.hbm_bandwidth_gbs",
            d.hbm_bandwidth_gbs,
            RANGE_GBS,
        )?;
        within(
            rate("gemm_tflops"),
            "device.rates.gemm_tflops",
            d.rates.gemm_tflops,
            RANGE_TFLOPS,
        )?;
        within(
            rate("attention_tflops"),
            "device.rates.attention_tflops",
            d.rates.attention_tflops,
            RANGE_TFLOPS,
        )?;
        if let Some(c) = d.rates.attention_causal_tflops {
            within(
                rate("attention_causal_tflops"),
                "device.rates.attention_causal_tflops",
                c,
                RANGE_TFLOPS,
            )?;
        }
        let point = |table: &'static str, i: usize, k: &'static str| {
            vec![K("device"), K("rates"), K(table), I(i), K(k)]
        };
        for (i, p) in d.rates.gemm_points.iter().enumerate() {
            let f = |x: &str| format!("device.rates.gemm_points[{i}].{x}");
            for (name, v) in [("m", p.m), ("n", p.n), ("k", p.k)] {
                positive(point("gemm_points", i, name), &f(name), v as f64)?;
            }
            within(
                point("gemm_points", i, "tflops"),
                &f("tflops"),
                p.tflops,
                RANGE_TFLOPS,
            )?;
        }
        // One measured rate per shape: the nearest point of a repeated shape would be whichever
        // the file lists first (an eleventh new-user pass; a hand merge of two tables does it).
        let mut seen = std::collections::HashMap::new();
        for (i, p) in d.rates.gemm_points.iter().enumerate() {
            if let Some(j) = seen.insert((p.m, p.n, p.k), i) {
                return bad(
                    point("gemm_points", i, "m"),
                    format!(
                        "`device.rates.gemm_points[{i}]` repeats the shape of `gemm_points[{j}]` (m = {}, n = {}, k = {}): one measured rate per shape",
                        p.m, p.n, p.k
                    ),
                );
            }
        }
        let mut seen = std::collections::HashMap::new();
        for (i, p) in d.rates.attention_points.iter().enumerate() {
            if let Some(j) = seen.insert((p.heads, p.sq, p.sk, p.d, p.causal), i) {
                return bad(
                    point("attention_points", i, "heads"),
                    format!(
                        "`device.rates.attention_points[{i}]` repeats the shape of `attention_points[{j}]` (heads = {}, sq = {}, sk = {}, d = {}, causal = {}): one measured rate per shape",
                        p.heads, p.sq, p.sk, p.d, p.causal
                    ),
                );
            }
        }
        for (i, p) in d.rates.attention_points.iter().enumerate() {
            let f = |x: &str| format!("device.rates.attention_points[{i}].{x}");
            for (name, v) in [("heads", p.heads), ("sq", p.sq), ("sk", p.sk), ("d", p.d)] {
                positive(point("attention_points", i, name), &f(name), v as f64)?;
            }
            within(
                point("attention_points", i, "tflops"),
                &f("tflops"),
                p.tflops,
                RANGE_TFLOPS,
            )?;
        }
        if !(d.hbm_reserved_gb.is_finite() && d.hbm_reserved_gb >= 0.0) {
            return bad(
                dev("hbm_reserved_gb"),
                format!(
                    "`device.hbm_reserved_gb` must be >= 0, got {}",
                    d.hbm_reserved_gb
                ),
            );
        }
        if d.hbm_reserved_gb >= d.hbm_gb {
            return bad(
                dev("hbm_reserved_gb"),
                format!(
                    "`device.hbm_reserved_gb` ({}) leaves nothing of `device.hbm_gb` ({})",
                    show(d.hbm_reserved_gb),
                    show(d.hbm_gb)
                ),
            );
        }
        if !(d.launch_overhead_us.is_finite() && d.launch_overhead_us >= 0.0) {
            return bad(
                dev("launch_overhead_us"),
                format!(
                    "`device.launch_overhead_us` must be >= 0, got {}",
                    d.launch_overhead_us
                ),
            );
        }
        if d.launch_overhead_us > MAX_LATENCY_US {
            return bad(
                dev("launch_overhead_us"),
                format!(
                    "`device.launch_overhead_us` = {:e} is outside the physical range [0, {MAX_LATENCY_US:e}] us",
                    d.launch_overhead_us
                ),
            );
        }
        if d.copy_engines == 0 || d.copy_engines > MAX_COUNT {
            return bad(
                dev("copy_engines"),
                format!(
                    "`device.copy_engines` must be in [1, {MAX_COUNT}], got {}",
                    d.copy_engines
                ),
            );
        }
        if d.sm_count > MAX_COUNT {
            return bad(
                dev("sm_count"),
                format!(
                    "`device.sm_count` must be in [0, {MAX_COUNT}] (0: no wave quantisation), got {}",
                    d.sm_count
                ),
            );
        }
        if self.levels.is_empty() {
            return bad(
                vec![K("levels")],
                "no `[[levels]]`: a topology needs at least one mesh level".into(),
            );
        }
        let level = |i: usize, k: &'static str| vec![K("levels"), I(i), K(k)];
        for (i, l) in self.levels.iter().enumerate() {
            if l.size == 0 {
                return bad(
                    level(i, "size"),
                    format!("levels[{i}] ('{}'): `size` must be at least 1", l.name),
                );
            }
        }
        let mut names = std::collections::BTreeMap::new();
        for (i, l) in self.levels.iter().enumerate() {
            let at = format!("levels[{i}] ('{}')", l.name);
            if l.name.trim().is_empty() {
                return bad(level(i, "name"), format!("levels[{i}]: `name` is empty"));
            }
            if let Some(first) = names.insert(l.name.as_str(), i) {
                return Err(
                    Invalid::new(level(i, "name"), format!("{at}: duplicate level name"))
                        .with_note(
                            level(first, "name"),
                            format!("levels[{first}] has the name '{}'", l.name),
                        ),
                );
            }
            within(
                level(i, "bandwidth_gbs"),
                &format!("{at}.bandwidth_gbs"),
                l.bandwidth_gbs,
                RANGE_GBS,
            )?;
            if !(l.efficiency.is_finite() && l.efficiency > 0.0 && l.efficiency <= 1.0) {
                return bad(
                    level(i, "efficiency"),
                    format!("{at}: `efficiency` must be in (0, 1], got {}", l.efficiency),
                );
            }
            if l.efficiency < MIN_EFFICIENCY {
                return bad(
                    level(i, "efficiency"),
                    format!(
                        "{at}: `efficiency` = {:e} is outside the physical range [{MIN_EFFICIENCY:e}, 1]",
                        l.efficiency
                    ),
                );
            }
            if !(l.latency_us.is_finite() && l.latency_us >= 0.0) {
                return bad(
                    level(i, "latency_us"),
                    format!("{at}: `latency_us` must be >= 0, got {}", l.latency_us),
                );
            }
            if l.latency_us > MAX_LATENCY_US {
                return bad(
                    level(i, "latency_us"),
                    format!(
                        "{at}: `latency_us` = {:e} is outside the physical range [0, {MAX_LATENCY_US:e}] us",
                        l.latency_us
                    ),
                );
            }
            let per_unit = self.devices_per_unit(i);
            if let Some(p) = l.ports {
                if p == 0 || p > per_unit || !per_unit.is_multiple_of(p) {
                    return bad(
                        level(i, "ports"),
                        format!(
                            "{at}: `ports` = {p} must divide the {per_unit} device(s) of one unit"
                        ),
                    );
                }
            }
        }
        for (i, w) in self.levels.windows(2).enumerate() {
            if w[0].bandwidth_gbs * w[0].efficiency > w[1].bandwidth_gbs * w[1].efficiency {
                return Err(Invalid::new(
                    level(i, "bandwidth_gbs"),
                    format!(
                        "levels must be ordered slowest first, but '{}' ({} GB/s) is faster than '{}' ({} GB/s)",
                        w[0].name,
                        show(w[0].bandwidth_gbs * w[0].efficiency),
                        w[1].name,
                        show(w[1].bandwidth_gbs * w[1].efficiency)
                    ),
                )
                .with_note(
                    level(i + 1, "bandwidth_gbs"),
                    format!("the next level, '{}'", w[1].name),
                ));
            }
        }
        if self.num_devices() > mercury_commir::MAX_DEVICES {
            return bad(
                vec![K("levels")],
                format!(
                    "{} devices is too many (at most {})",
                    self.num_devices(),
                    mercury_commir::MAX_DEVICES
                ),
            );
        }
        Ok(())
    }

    /// Level sizes, slowest first.
    pub fn mesh(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.size).collect()
    }

    pub fn num_devices(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.size)
            .fold(1usize, |a, b| a.saturating_mul(b))
    }

    /// Devices below one unit of level `level` (sharing coordinates `0..=level`).
    pub fn devices_per_unit(&self, level: usize) -> usize {
        self.levels[level + 1..].iter().map(|l| l.size).product()
    }

    pub fn ports(&self, level: usize) -> usize {
        self.levels[level]
            .ports
            .unwrap_or_else(|| self.devices_per_unit(level))
    }

    pub fn coords(&self, device: usize) -> Vec<usize> {
        mercury_plan::coords_of(&self.mesh(), device)
    }

    /// The slowest level at which the two devices' coordinates differ (None if equal).
    pub fn tier(&self, a: usize, b: usize) -> Option<usize> {
        if a == b {
            return None;
        }
        // Row-major numbering: the level is found from the quotient by the strides.
        let mut stride = self.num_devices();
        for (i, l) in self.levels.iter().enumerate() {
            stride /= l.size;
            if a / stride != b / stride {
                return Some(i);
            }
        }
        None
    }

    /// The port of `device` at `level`.
    pub fn port(&self, level: usize, device: usize) -> Port {
        let per_unit = self.devices_per_unit(level);
        let unit = device / per_unit;
        let local = device % per_unit;
        Port {
            level,
            unit,
            port: local % self.ports(level),
        }
    }

    /// Achievable bandwidth of one port of `level`, bytes/s per direction.
    pub fn bandwidth(&self, level: usize) -> f64 {
        let l = &self.levels[level];
        l.bandwidth_gbs * l.efficiency * 1e9
    }

    pub fn latency(&self, level: usize) -> f64 {
        self.levels[level].latency_us * 1e-6
    }

    pub fn gemm_rate(&self) -> f64 {
        self.device.rates.gemm_tflops * 1e12
    }

    /// The GEMM rate for `m x n x k`, FLOP/s: the measured point nearest in octaves
    /// (`gemm_points`; ties: the first listed) and that point, else [`Topology::gemm_rate`]
    /// and `None`. The caller corrects for the difference in tile quantisation between the
    /// shape and the point; the nearest point, not an interpolation, so a table measured at
    /// the shapes a plan runs prices them exactly.
    pub fn gemm_rate_for(&self, m: usize, n: usize, k: usize) -> (f64, Option<&GemmPoint>) {
        let best = self.device.rates.gemm_points.iter().min_by(|a, b| {
            let da = octaves(&[m, n, k], &[a.m, a.n, a.k]);
            let db = octaves(&[m, n, k], &[b.m, b.n, b.k]);
            da.total_cmp(&db)
        });
        match best {
            Some(p) => (p.tflops * 1e12, Some(p)),
            None => (self.gemm_rate(), None),
        }
    }

    /// The attention rate for a call of `heads` (batch x query heads) `sq x sk` blocks at head
    /// dim `d`, FLOP/s per visible FLOP: the measured point of the same `d` and mask nearest
    /// in octaves over (`heads`, `sq`, `sk`) (`attention_points`), and that point; else
    /// [`Topology::attention_rate`] and `None` (also for a head dim no point was measured
    /// at).
    pub fn attention_rate_for(
        &self,
        heads: usize,
        sq: usize,
        sk: usize,
        d: usize,
        causal: bool,
    ) -> (f64, Option<&AttentionPoint>) {
        let best = self
            .device
            .rates
            .attention_points
            .iter()
            .filter(|p| p.d == d && p.causal == causal)
            .min_by(|a, b| {
                let da = octaves(&[heads, sq, sk], &[a.heads, a.sq, a.sk]);
                let db = octaves(&[heads, sq, sk], &[b.heads, b.sq, b.sk]);
                da.total_cmp(&db)
            });
        match best {
            Some(p) => (p.tflops * 1e12, Some(p)),
            None => (self.attention_rate(causal), None),
        }
    }

    pub fn attention_rate(&self, causal: bool) -> f64 {
        let r = &self.device.rates;
        let t = if causal {
            r.attention_causal_tflops.unwrap_or(r.attention_tflops)
        } else {
            r.attention_tflops
        };
        t * 1e12
    }

    pub fn hbm_bandwidth(&self) -> f64 {
        self.device.hbm_bandwidth_gbs * 1e9
    }

    pub fn launch_overhead(&self) -> f64 {
        self.device.launch_overhead_us * 1e-6
    }

    /// Bytes a plan may use per device: capacity minus the reserve.
    pub fn usable_hbm_bytes(&self) -> u64 {
        ((self.device.hbm_gb - self.device.hbm_reserved_gb) * 1e9) as u64
    }

    pub fn hbm_bytes(&self) -> u64 {
        (self.device.hbm_gb * 1e9) as u64
    }

    /// The physical description with defaults resolved and names/comments dropped: two files
    /// that describe the same machine normalise to the same value.
    pub fn normalized(&self) -> serde_json::Value {
        let levels: Vec<serde_json::Value> = (0..self.levels.len())
            .map(|i| {
                let l = &self.levels[i];
                serde_json::json!({
                    "size": l.size,
                    "bandwidth_bytes_per_s": canon(self.bandwidth(i)),
                    "latency_s": canon(self.latency(i)),
                    "ports": self.ports(i),
                })
            })
            .collect();
        let d = &self.device;
        let mut v = serde_json::json!({
            "device": {
                "hbm_bytes": self.hbm_bytes(),
                "usable_hbm_bytes": self.usable_hbm_bytes(),
                "hbm_bandwidth": canon(self.hbm_bandwidth()),
                "copy_engines": d.copy_engines,
                "sm_count": d.sm_count,
                "launch_overhead_s": canon(self.launch_overhead()),
                "gemm_rate": canon(self.gemm_rate()),
                "attention_rate": canon(self.attention_rate(false)),
                "attention_causal_rate": canon(self.attention_rate(true)),
            },
            "levels": levels,
        });
        // Measured rate tables enter the hash only when present, so files without them keep
        // the hashes (and schedule cache entries) they had.
        let r = &d.rates;
        if !r.gemm_points.is_empty() {
            v["device"]["gemm_points"] = r
                .gemm_points
                .iter()
                .map(|p| serde_json::json!([p.m, p.n, p.k, canon(p.tflops)]))
                .collect();
        }
        if !r.attention_points.is_empty() {
            v["device"]["attention_points"] = r
                .attention_points
                .iter()
                .map(|p| serde_json::json!([p.heads, p.sq, p.sk, p.d, p.causal, canon(p.tflops)]))
                .collect();
        }
        v
    }

    /// Stable 64-bit FNV-1a hash (hex) of [`Topology::normalized`].
    pub fn normalized_hash(&self) -> String {
        format!(
            "{:016x}",
            crate::fnv1a64(self.normalized().to_string().as_bytes())
        )
    }

    /// One line describing the machine, e.g. `2 node x 4 gpu (8 devices) NVIDIA H100`.
    pub fn summary(&self) -> String {
        let shape: Vec<String> = self
            .levels
            .iter()
            .map(|l| format!("{} {}", l.size, l.name))
            .collect();
        format!(
            "{} ({} devices) {}",
            shape.join(" x "),
            self.num_devices(),
            self.device.name
        )
    }
}

/// A number for a message: at most 6 significant digits, in exponent form when very large or
/// small (`1e308`, not 309 digits; `0.0082`, not `0.008199999999999999`).
fn show(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e9).contains(&x.abs()) {
        return format!("{x:e}");
    }
    let r: f64 = format!("{x:.5e}").parse().unwrap_or(x);
    format!("{r}")
}

/// Rounds to 9 significant digits so that float noise does not change hashes.
fn canon(x: f64) -> String {
    format!("{x:.9e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_validate() {
        for (name, _) in PRESETS {
            let t = Topology::preset(name).unwrap().unwrap();
            assert_eq!(&t.name, name, "preset file name and `name` differ");
        }
        let t = Topology::preset("h100-2x4").unwrap().unwrap();
        assert_eq!(t.mesh(), vec![2, 4]);
        assert_eq!(t.num_devices(), 8);
        assert_eq!(
            Topology::preset("h100-2x8").unwrap().unwrap().num_devices(),
            16
        );
        assert_eq!(
            Topology::preset("h200-1x8")
                .unwrap()
                .unwrap()
                .usable_hbm_bytes(),
            137_000_000_000
        );
    }

    #[test]
    fn preset_files_match_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
        for (name, text) in PRESETS {
            let file = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
            assert_eq!(&file, text);
        }
    }

    #[test]
    fn tiers_and_ports() {
        let t = Topology::preset("h100-2x4").unwrap().unwrap();
        assert_eq!(t.tier(0, 0), None);
        assert_eq!(t.tier(0, 3), Some(1));
        assert_eq!(t.tier(3, 4), Some(0));
        assert_eq!(t.tier(7, 0), Some(0));
        // One NIC per node: all GPUs of node 1 share port (0, 1, 0).
        for d in 4..8 {
            assert_eq!(
                t.port(0, d),
                Port {
                    level: 0,
                    unit: 1,
                    port: 0
                }
            );
        }
        // NVLink: one egress per GPU.
        assert_eq!(t.port(1, 5).unit, 5);
        assert!((t.bandwidth(0) - 12.5e9 * 0.9).abs() < 1.0);
    }

    fn base() -> String {
        let (_, text) = PRESETS.iter().find(|(n, _)| *n == "h100-2x4").unwrap();
        text.to_string()
    }

    #[test]
    fn bad_files_give_clear_errors() {
        let cases: Vec<(String, &str)> = vec![
            ("name = 3".into(), "not a valid topology"),
            (
                base().replace("size = 4", "size = 0"),
                "`size` must be at least 1",
            ),
            (
                base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = -1.0"),
                "bandwidth_gbs` must be a positive",
            ),
            (
                base().replace("ports = 1", "ports = 3"),
                "`ports` = 3 must divide",
            ),
            (
                base().replace("bandwidth_gbs = 12.5", "bandwidth_gbs = 4500.0"),
                "slowest first",
            ),
            (
                base().replace("copy_engines = 3", "copy_engines = 0"),
                "copy_engines",
            ),
            (
                base().replace("hbm_reserved_gb = 4.0", "hbm_reserved_gb = 90.0"),
                "leaves nothing",
            ),
            (
                base().replace("latency_us = 3.0", "latncy_us = 3.0"),
                "unknown field",
            ),
            (
                base().replace("efficiency = 0.82", "efficiency = 1.5"),
                "efficiency",
            ),
            (
                base().replace("name = \"gpu\"", "name = \"node\""),
                "duplicate level name",
            ),
        ];
        for (text, want) in cases {
            let e = Topology::from_toml_str(&text, "test.toml").unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "expected '{want}' in: {msg}");
            assert!(msg.starts_with("test.toml"), "origin missing: {msg}");
        }
        let e = Topology::load("/nonexistent/topo.toml").unwrap_err();
        assert!(e.to_string().contains("h100-2x4"), "{e}");
    }

    /// `line:col` of the value on the first line of `text` that starts with `line_start`.
    fn value_at(text: &str, line_start: &str) -> String {
        let (i, l) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no line '{line_start}'"));
        let col = l.find('=').expect("a key = value line") + 3;
        format!("{}:{col}", i + 1)
    }

    #[test]
    fn value_errors_are_located_at_the_value() {
        // (text, the line whose value is wrong, the message).
        let cases: Vec<(String, &str, &str)> = vec![
            (
                base().replace("size = 4", "size = 0"),
                "size = 0",
                "levels[1] ('gpu'): `size` must be at least 1",
            ),
            (
                base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = nan"),
                "bandwidth_gbs = nan",
                "`levels[1] ('gpu').bandwidth_gbs` must be a positive number, got NaN",
            ),
            (
                base().replace("ports = 1", "ports = 3"),
                "ports = 3",
                "levels[0] ('node'): `ports` = 3 must divide the 4 device(s) of one unit",
            ),
            (
                base().replace("efficiency = 0.82", "efficiency = 1.5"),
                "efficiency = 1.5",
                "`efficiency` must be in (0, 1], got 1.5",
            ),
            (
                base().replace("copy_engines = 3", "copy_engines = 0"),
                "copy_engines = 0",
                "`device.copy_engines` must be in [1, 1048576], got 0",
            ),
            (
                base().replace("hbm_reserved_gb = 4.0", "hbm_reserved_gb = 90.0"),
                "hbm_reserved_gb = 90.0",
                "leaves nothing",
            ),
            (
                base().replace("gemm_tflops = 780.0", "gemm_tflops = -1.0"),
                "gemm_tflops = -1.0",
                "`device.rates.gemm_tflops` must be a positive number, got -1",
            ),
            (
                base().replace("name = \"h100-2x4\"", "name = \"\""),
                "name = \"\"",
                "`name` is empty",
            ),
            // Positive but absurd: the model's times came out infinite or 300 digits long
            // (a new-user pass; mercury-tune hung drawing its plot).
            (
                base().replace("gemm_tflops = 780.0", "gemm_tflops = 1e-320"),
                "gemm_tflops = 1e-320",
                "`device.rates.gemm_tflops` = 1e-320 is outside the physical range [1e-6, 1e6] TFLOP/s",
            ),
            (
                base().replace("efficiency = 0.82", "efficiency = 1e-320"),
                "efficiency = 1e-320",
                "`efficiency` = 1e-320 is outside the physical range [1e-3, 1]",
            ),
            (
                base().replace("latency_us = 3.0", "latency_us = 1e300"),
                "latency_us = 1e300",
                "`latency_us` = 1e300 is outside the physical range [0, 1e7] us",
            ),
            (
                base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = 1e-300"),
                "bandwidth_gbs = 1e-300",
                "bandwidth_gbs` = 1e-300 is outside the physical range [1e-3, 1e6] GB/s",
            ),
            (
                base().replace("sm_count = 132", "sm_count = 99999999999"),
                "sm_count = 99999999999",
                "`device.sm_count` must be in [0, 1048576]",
            ),
        ];
        for (text, line, want) in cases {
            let e = Topology::from_toml_str(&text, "t.toml").unwrap_err();
            let TopologyError::Located(d) = &e else {
                panic!("not located: {e}")
            };
            let r = d.render();
            let head = format!("t.toml:{}: error: ", value_at(&text, line));
            assert!(r.starts_with(&head), "expected '{head}...' in:\n{r}");
            assert!(r.lines().next().unwrap().contains(want), "{r}");
            // The source line and a caret under the value.
            assert!(r.lines().nth(1) == Some(line), "{r}");
        }
    }

    #[test]
    fn value_errors_name_the_other_place_in_a_note() {
        // Two levels of one name: the second, with a note at the first.
        let text = base().replace("name = \"gpu\"", "name = \"node\"");
        let r = Topology::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        let lines: Vec<&str> = text.lines().collect();
        let node: Vec<usize> = (0..lines.len())
            .filter(|i| lines[*i] == "name = \"node\"")
            .collect();
        assert!(
            r.starts_with(&format!(
                "t.toml:{}:8: error: levels[1] ('node'): duplicate level name",
                node[1] + 1
            )),
            "{r}"
        );
        assert!(
            r.contains(&format!(
                "t.toml:{}:8: note: levels[0] has the name 'node'",
                node[0] + 1
            )),
            "{r}"
        );
        // Levels out of order: at the faster one's bandwidth, the next one in a note.
        let text = base().replace("bandwidth_gbs = 12.5", "bandwidth_gbs = 4500.0");
        let r = Topology::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            r.starts_with(&format!(
                "t.toml:{}: error: levels must be ordered slowest first",
                value_at(&text, "bandwidth_gbs = 4500.0")
            )),
            "{r}"
        );
        assert!(
            r.contains(&format!(
                "t.toml:{}: note: the next level, 'gpu'",
                value_at(&text, "bandwidth_gbs = 450.0")
            )),
            "{r}"
        );
    }

    #[test]
    fn value_errors_in_inline_tables_and_rate_points_are_located() {
        let text = "name = \"t\"\n\
                    device = { name = \"d\", hbm_gb = 80.0, hbm_bandwidth_gbs = 1.0, copy_engines = 1, rates = { gemm_tflops = 1.0, attention_tflops = 1.0 } }\n\
                    levels = [{ name = \"gpu\", size = 0, bandwidth_gbs = 1.0, latency_us = 1.0 }]\n";
        let r = Topology::from_toml_str(text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            r.starts_with("t.toml:3:34: error: levels[0] ('gpu'): `size` must be at least 1"),
            "{r}"
        );
        // The error of `t` written as TOML, and the 1-based line of the `n`th (from 0) line
        // starting with `key`.
        let refused = |t: &Topology, key: &str, n: usize| {
            let text = toml::to_string(t).unwrap();
            let r = Topology::from_toml_str(&text, "t.toml")
                .unwrap_err()
                .to_string();
            let line = text
                .lines()
                .enumerate()
                .filter(|(_, l)| l.starts_with(key))
                .nth(n)
                .map(|(i, _)| i + 1)
                .unwrap();
            (r, line)
        };
        let mut t = with_points();
        t.device.rates.attention_points[1].sq = 0;
        // The second `sq = ...` line of the file is the second point's.
        let (r, line) = refused(&t, "sq = ", 1);
        assert!(
            r.starts_with(&format!(
                "t.toml:{line}:6: error: `device.rates.attention_points[1].sq` must be a positive number, got 0"
            )),
            "{r}"
        );
        // A shape measured twice: at the second point, naming the first.
        let mut t = with_points();
        let mut twice = t.device.rates.gemm_points[0].clone();
        twice.tflops *= 0.5;
        t.device.rates.gemm_points.push(twice);
        let (r, line) = refused(&t, "m = ", 2);
        assert!(
            r.starts_with(&format!(
                "t.toml:{line}:5: error: `device.rates.gemm_points[2]` repeats the shape of `gemm_points[0]` (m = 512, n = 4096, k = 8192): one measured rate per shape"
            )),
            "{r}"
        );
        let mut t = with_points();
        let twice = t.device.rates.attention_points[1].clone();
        t.device.rates.attention_points.push(twice);
        let r = Topology::from_toml_str(&toml::to_string(&t).unwrap(), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            r.contains(
                "`device.rates.attention_points[2]` repeats the shape of `attention_points[1]`"
            ),
            "{r}"
        );
        // No level at all: at the empty array.
        let mut t = plain_measured();
        t.levels.clear();
        let text = toml::to_string(&t).unwrap();
        let r = Topology::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            r.starts_with(&format!(
                "t.toml:{}: error: no `[[levels]]`",
                value_at(&text, "levels = ")
            )),
            "{r}"
        );
    }

    #[test]
    fn normalized_hash_ignores_names_but_not_links() {
        let a = Topology::preset("h100-2x4").unwrap().unwrap();
        let mut b = a.clone();
        b.name = "renamed".into();
        b.description.clear();
        b.levels[0].link = "other text".into();
        assert_eq!(a.normalized_hash(), b.normalized_hash());
        b.levels[0].bandwidth_gbs = 25.0;
        assert_ne!(a.normalized_hash(), b.normalized_hash());
        let mut c = a.clone();
        c.levels[0].ports = Some(4);
        assert_ne!(a.normalized_hash(), c.normalized_hash());
    }

    /// `h200-1x2-measured.toml` without its rate tables.
    fn plain_measured() -> Topology {
        let mut t = Topology::from_file(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/h200-1x2-measured.toml"
        )))
        .unwrap();
        t.device.rates.gemm_points.clear();
        t.device.rates.attention_points.clear();
        t
    }

    fn with_points() -> Topology {
        let base = toml::to_string(&plain_measured()).unwrap();
        let text = base.replace(
            "[environment]",
            "[[device.rates.gemm_points]]\nm = 512\nn = 4096\nk = 8192\ntflops = 700.0\n\n\
             [[device.rates.gemm_points]]\nm = 8192\nn = 8192\nk = 8192\ntflops = 760.0\n\n\
             [[device.rates.attention_points]]\nheads = 32\nsq = 16384\nsk = 16384\nd = 128\n\
             causal = false\ntflops = 668.0\n\n\
             [[device.rates.attention_points]]\nheads = 32\nsq = 65536\nsk = 65536\nd = 128\n\
             causal = false\ntflops = 614.0\n\n[environment]",
        );
        Topology::from_toml_str(&text, "test").unwrap()
    }

    #[test]
    fn rate_points_price_the_nearest_measured_shape() {
        let t = with_points();
        // Exact shapes get their own point; others the nearest in octaves.
        assert_eq!(t.gemm_rate_for(512, 4096, 8192).0, 700e12);
        assert_eq!(t.gemm_rate_for(1024, 4096, 8192).0, 700e12);
        assert_eq!(t.gemm_rate_for(16384, 8192, 8192).0, 760e12);
        assert_eq!(t.attention_rate_for(32, 16384, 16384, 128, false).0, 668e12);
        assert_eq!(
            t.attention_rate_for(32, 131072, 131072, 128, false).0,
            614e12
        );
        // No point of that head dim or mask: the single figures.
        let (r, p) = t.attention_rate_for(32, 16384, 16384, 64, false);
        assert!(p.is_none());
        assert_eq!(r, t.attention_rate(false));
        assert!(t
            .attention_rate_for(32, 16384, 16384, 128, true)
            .1
            .is_none());
        // Without points: the single figures, and the hash of the file without them.
        let plain = plain_measured();
        assert_eq!(plain.gemm_rate_for(512, 4096, 8192).0, plain.gemm_rate());
        assert_ne!(plain.normalized_hash(), t.normalized_hash());
        let mut u = t.clone();
        u.device.rates.attention_points[0].tflops = 600.0;
        assert_ne!(u.normalized_hash(), t.normalized_hash());
        u.device.rates.gemm_points.clear();
        u.device.rates.attention_points.clear();
        assert_eq!(u.normalized_hash(), plain.normalized_hash());
    }

    #[test]
    fn rate_points_are_validated() {
        let mut t = with_points();
        t.device.rates.gemm_points[1].tflops = -1.0;
        let e = t.validate().unwrap_err();
        assert!(e.contains("device.rates.gemm_points[1].tflops"), "{e}");
        let mut t = with_points();
        t.device.rates.attention_points[0].sq = 0;
        let e = t.validate().unwrap_err();
        assert!(e.contains("device.rates.attention_points[0].sq"), "{e}");
    }
}
