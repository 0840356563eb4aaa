//! Machine descriptions: mesh levels (slowest first) with their links, and the device's
//! capacities and measured rates. The TOML format is documented in `docs/topology.md`.
//!
//! Physical devices are numbered row-major over the level sizes (node-major), exactly like the
//! ranks of a [`mercury_plan::Plan`]; a plan's rank `r` runs on device `r` whatever the plan's
//! own mesh factorisation is. Two devices talk over the links of the *slowest* level at which
//! their coordinates differ (their *tier*).

use serde::{Deserialize, Serialize};
use std::path::Path;

mod check;
#[cfg(test)]
mod tests;

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
    /// bf16 attention backward (`attention_bwd`), TFLOP/s per visible FLOP as the patch counts
    /// them (`2 (3 d_qk + 2 d_v)` per visible pair: 2.5x the forward's at `d_qk = d_v`);
    /// without it, the forward's rate (of the nearest point, or the single figure) times
    /// [`BWD_RATE_RATIO`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_bwd_tflops: Option<f64>,
    /// Same for causal tiles; without it, the forward's causal rate times
    /// [`BWD_CAUSAL_RATE_RATIO`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_bwd_causal_tflops: Option<f64>,
}

/// The attention backward's rate over the forward's, non-causal, measured on one GPU: cuDNN's
/// fused backward at B1 H32 S32K D128 bf16 on an H100 runs at 534.4 TFLOP/s counting the
/// patch's FLOPs (docs/perf.md, "The attention backward", 18ac586), its forward at the same
/// shape at 635.4 (27.686 ms, docs/perf.md P2c, d774ac5).
pub const BWD_RATE_RATIO: f64 = 534.4 / 635.4;

/// The same for causal attention: 557.5 TFLOP/s backward over 627.6 forward (14.016 ms).
pub const BWD_CAUSAL_RATE_RATIO: f64 = 557.5 / 627.6;

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

    /// The attention backward's rate, FLOP/s per visible FLOP of the patch: the topology's
    /// backward figure where it has one, else the forward's ([`Topology::attention_rate_for`])
    /// times the measured ratio ([`BWD_RATE_RATIO`], [`BWD_CAUSAL_RATE_RATIO`]); and the
    /// forward point it was scaled from (for its wave quantisation).
    pub fn attention_bwd_rate_for(
        &self,
        heads: usize,
        sq: usize,
        sk: usize,
        d: usize,
        causal: bool,
    ) -> (f64, Option<&AttentionPoint>) {
        let r = &self.device.rates;
        let own = if causal {
            r.attention_bwd_causal_tflops.or(r.attention_bwd_tflops)
        } else {
            r.attention_bwd_tflops
        };
        if let Some(t) = own {
            return (t * 1e12, None);
        }
        let (fwd, point) = self.attention_rate_for(heads, sq, sk, d, causal);
        let ratio = if causal {
            BWD_CAUSAL_RATE_RATIO
        } else {
            BWD_RATE_RATIO
        };
        (fwd * ratio, point)
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
