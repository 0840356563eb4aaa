//! Operators by shape: an attention or GEMM description (what `mercury-tune`'s `.toml` files
//! hold, what the graph level asks for) turned into a CommIR operator, by rewriting the axis
//! extents and buffer placements of the example operators of `examples/`. Their candidates
//! then come from the CommIR generator ([`crate::commir_source::CommirSource`]).

use crate::commir_source::CommirSource;
use crate::search::SourceError;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The example operators the descriptions start from (the repository's files).
pub mod sources {
    /// Multi-head attention, `examples/attention.mlir`.
    pub const ATTENTION: &str = include_str!("../../../examples/attention.mlir");
    /// Grouped-query attention, `examples/attention_gqa.mlir`.
    pub const ATTENTION_GQA: &str = include_str!("../../../examples/attention_gqa.mlir");
    /// All-gather GEMM, `examples/ag_gemm.mlir`.
    pub const AG_GEMM: &str = include_str!("../../../examples/ag_gemm.mlir");
    /// GEMM reduce-scatter, `examples/gemm_rs.mlir`.
    pub const GEMM_RS: &str = include_str!("../../../examples/gemm_rs.mlir");
}

/// Shape of an attention operator (bf16; q, k, v and o sequence-sharded over all devices, as
/// in `examples/attention.mlir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// Tokens per sequence.
    pub seq: usize,
    pub head_dim: usize,
    #[serde(default)]
    pub causal: bool,
}

impl AttentionShape {
    /// `attention b1 hq32 hk8 s32768 d128 bf16` (` causal` when masked).
    pub fn signature(&self) -> String {
        format!(
            "attention b{} hq{} hk{} s{} d{}{} bf16",
            self.batch,
            self.heads,
            self.kv_heads,
            self.seq,
            self.head_dim,
            if self.causal { " causal" } else { "" }
        )
    }

    /// Total FLOPs (4*b*h*s*s*d, about halved for causal).
    pub fn flops(&self) -> f64 {
        let pairs = if self.causal {
            self.seq as f64 * (self.seq as f64 + 1.0) / 2.0
        } else {
            self.seq as f64 * self.seq as f64
        };
        4.0 * self.batch as f64 * self.heads as f64 * self.head_dim as f64 * pairs
    }
}

/// `C[m, n] = A[m, k] B[k, n]` in bf16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The placements of `examples/gemm_rs.mlir` (A and B sharded along k, C by rows) instead
    /// of `examples/ag_gemm.mlir`'s (A by rows, B and C by columns).
    #[serde(default)]
    pub reduce_scatter: bool,
}

impl GemmShape {
    /// `gemm m8192 n8192 k8192 bf16` (` reduce-scatter` with that layout).
    pub fn signature(&self) -> String {
        format!(
            "gemm m{} n{} k{} bf16{}",
            self.m,
            self.n,
            self.k,
            if self.reduce_scatter {
                " reduce-scatter"
            } else {
                ""
            }
        )
    }
}

/// An operator description, `mercury-tune`'s `.toml` input:
/// ```toml
/// [attention]
/// batch = 1
/// heads = 32
/// kv_heads = 8
/// seq = 32768
/// head_dim = 128
/// causal = false
/// ```
/// or `[gemm] m = .. n = .. k = ..` (`reduce_scatter = true` for the row-parallel layout).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorSpec {
    #[serde(default)]
    pub attention: Option<AttentionShape>,
    #[serde(default)]
    pub gemm: Option<GemmShape>,
    /// The devices the operator is written for (the example's one-level mesh set to them,
    /// [`OperatorSpec::parse_on`]); `None`: the example's own mesh (8 devices).
    #[serde(skip)]
    pub devices: Option<usize>,
}

impl OperatorSpec {
    /// Parses a description; exactly one of `[attention]` and `[gemm]`. Values the example
    /// operator cannot take (an extent its placements do not divide, one below an axis'
    /// minimum block) are refused at the value. The operator keeps its example's mesh (8
    /// devices); [`OperatorSpec::parse_on`] writes it for a topology's devices.
    pub fn parse(text: &str, origin: &str) -> Result<OperatorSpec, SourceError> {
        Self::parse_with(text, origin, None)
    }

    /// [`OperatorSpec::parse`] for an operator on `devices` devices (a description declares no
    /// mesh: the example's one-level mesh is set to the topology's devices, so what must divide
    /// an extent is that count, said at the value).
    pub fn parse_on(text: &str, origin: &str, devices: usize) -> Result<OperatorSpec, SourceError> {
        Self::parse_with(text, origin, Some(devices))
    }

    fn parse_with(
        text: &str,
        origin: &str,
        devices: Option<usize>,
    ) -> Result<OperatorSpec, SourceError> {
        let mut spec: OperatorSpec =
            toml::from_str(text).map_err(|e| {
                match crate::toml_diagnostic(&e, origin, text, "operator file") {
                    Ok(d) => SourceError::located(&d),
                    Err(m) => SourceError::new(m),
                }
            })?;
        if devices == Some(0) || devices.is_some_and(|n| n > mercury_commir::MAX_DEVICES) {
            return Err(SourceError::new(format!(
                "{origin}: an operator on {} devices (at most {})",
                devices.unwrap_or(0),
                mercury_commir::MAX_DEVICES
            )));
        }
        spec.devices = devices;
        let at = |table: &str, key: Option<&str>, msg: String| -> SourceError {
            let file = mercury_ir::SourceFile::new(origin, text);
            let offset = toml_edit::ImDocument::parse(text).ok().map_or(0, |d| {
                let t = d.as_item().get(table);
                let v = key.and_then(|k| t.and_then(|t| t.get(k)));
                v.and_then(|v| v.span())
                    .or_else(|| t.and_then(|t| t.span()))
                    .map_or(0, |r| r.start)
            });
            SourceError::located(&mercury_ir::Diagnostic::error(file.location(offset), msg))
        };
        // Extents the operator can hold: positive, within the dialect's limit.
        let extent = |table: &str, key: &str, v: usize| -> Result<(), SourceError> {
            if v == 0 || v as u64 > mercury_commir::MAX_EXTENT as u64 {
                return Err(at(
                    table,
                    Some(key),
                    format!(
                        "[{table}] {key} must be between 1 and {} (2^40), got {v}",
                        mercury_commir::MAX_EXTENT
                    ),
                ));
            }
            Ok(())
        };
        match (&spec.attention, &spec.gemm) {
            (Some(a), None) => {
                let values = [
                    ("batch", a.batch),
                    ("heads", a.heads),
                    ("kv_heads", a.kv_heads),
                    ("seq", a.seq),
                    ("head_dim", a.head_dim),
                ];
                for (k, v) in values {
                    extent("attention", k, v)?;
                }
                if !a.heads.is_multiple_of(a.kv_heads) {
                    return Err(at(
                        "attention",
                        Some("kv_heads"),
                        format!(
                            "[attention] heads ({}) must be a multiple of kv_heads ({})",
                            a.heads, a.kv_heads
                        ),
                    ));
                }
                if let Some((k, m)) = attention_example(a, devices)
                    .ok()
                    .and_then(|ex| example_refusal(&ex, "attention", &values))
                {
                    return Err(at("attention", Some(k), m));
                }
                Ok(spec)
            }
            (None, Some(g)) => {
                let values = [("m", g.m), ("n", g.n), ("k", g.k)];
                for (k, v) in values {
                    extent("gemm", k, v)?;
                }
                let ex = gemm_example(g.reduce_scatter, g.m, g.n, g.k, devices);
                if let Some((k, m)) = example_refusal(&ex, "gemm", &values) {
                    return Err(at("gemm", Some(k), m));
                }
                Ok(spec)
            }
            (Some(_), Some(_)) => Err(at(
                "gemm",
                None,
                "give exactly one of [attention] or [gemm]; this file has both".into(),
            )),
            (None, None) => Err(SourceError::new(format!(
                "{origin}: give exactly one of [attention] or [gemm]"
            ))),
        }
    }

    /// The CommIR operator of the description.
    pub fn operator(&self) -> Result<Operator, SourceError> {
        match (&self.attention, &self.gemm) {
            (Some(a), _) => attention_example(a, self.devices)
                .and_then(|ex| attention_text(a, &ex))
                .map_err(SourceError::new),
            (_, Some(g)) => Ok(gemm_text(
                &gemm_example(g.reduce_scatter, g.m, g.n, g.k, self.devices),
                g.m,
                g.n,
                g.k,
            )),
            _ => Err(SourceError::new("an empty operator description")),
        }
    }

    /// The CommIR generator over the description's operator.
    pub fn source(&self) -> Result<CommirSource, SourceError> {
        let op = self.operator()?;
        CommirSource::from_text(&op.text, &op.origin, None)
    }
}

/// An operator as CommIR text, with where it came from.
#[derive(Debug, Clone)]
pub struct Operator {
    pub text: String,
    /// The example file and the extents written into it.
    pub origin: String,
    /// The axis the key/value heads iterate (`h` for MHA, `hk` for GQA; empty for GEMMs).
    pub head_axis: &'static str,
}

/// `text` with the extent of `commir.axis @axis` set to `extent`; `None` when the text has no
/// such axis.
pub fn with_extent(text: &str, axis: &str, extent: usize) -> Option<String> {
    rewrite_line(text, &format!("commir.axis @{axis} = "), |rest| {
        let tail = rest.split_once(' ').map(|(_, r)| r).unwrap_or("");
        format!("{extent} {tail}")
    })
}

/// `text` with the placement of `commir.buffer @buffer` set to `sharding` (`[R, S(0)]`);
/// `None` when the text has no such buffer.
pub fn with_sharding(text: &str, buffer: &str, sharding: &str) -> Option<String> {
    rewrite_line(text, &format!("commir.buffer @{buffer} : "), |rest| {
        let head = rest.split_once(" sharding ").map_or(rest, |(h, _)| h);
        format!("{head} sharding {sharding}")
    })
}

/// Rewrites what follows `key` on the lines that start with it (after indentation).
fn rewrite_line(text: &str, key: &str, f: impl Fn(&str) -> String) -> Option<String> {
    let mut found = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim_start();
        match t.strip_prefix(key) {
            Some(rest) => {
                found = true;
                let indent = &line[..line.len() - t.len()];
                let _ = writeln!(out, "{indent}{key}{}", f(rest));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    found.then_some(out)
}

/// `text` with every `(axis, extent)` of `set` rewritten.
pub fn with_extents(text: &str, set: &[(&str, usize)]) -> Result<String, String> {
    let mut t = text.to_string();
    for (axis, e) in set {
        t = with_extent(&t, axis, *e).ok_or_else(|| format!("no axis @{axis}"))?;
    }
    Ok(t)
}

/// The example operator a description is written into: its file (in `examples/`), its text,
/// the axis the key/value heads iterate, and each axis extent the description sets with the
/// `.toml` key that gives it.
struct Example {
    file: &'static str,
    /// The example's text, its mesh set to the devices asked for.
    text: String,
    /// The devices its mesh was set to (`None`: the example's own).
    devices: Option<usize>,
    head_axis: &'static str,
    set: Vec<(&'static str, &'static str, usize)>,
}

impl Example {
    /// The `(axis, extent)` pairs to write into the text.
    fn extents(&self) -> Vec<(&'static str, usize)> {
        self.set.iter().map(|&(a, _, e)| (a, e)).collect()
    }
}

/// The example of an attention shape: MHA (`h` heads) or GQA (`hk` key/value heads of `g`
/// query heads each).
fn attention_example(shape: &AttentionShape, devices: Option<usize>) -> Result<Example, String> {
    if shape.batch == 0 || shape.heads == 0 || shape.seq == 0 || shape.head_dim == 0 {
        return Err("attention dimensions must be positive".into());
    }
    let (file, text, head_axis, heads) = if shape.kv_heads == shape.heads {
        let heads = vec![("h", "heads", shape.heads)];
        ("attention.mlir", sources::ATTENTION, "h", heads)
    } else {
        if shape.kv_heads == 0 || !shape.heads.is_multiple_of(shape.kv_heads) {
            return Err("query heads must be a multiple of the key/value heads".into());
        }
        let heads = vec![
            ("hk", "kv_heads", shape.kv_heads),
            ("g", "heads", shape.heads / shape.kv_heads),
        ];
        ("attention_gqa.mlir", sources::ATTENTION_GQA, "hk", heads)
    };
    let mut set = vec![("b", "batch", shape.batch)];
    set.extend(heads);
    set.extend([("i", "seq", shape.seq), ("j", "seq", shape.seq)]);
    Ok(Example {
        file,
        text: on_devices(text, devices),
        devices,
        head_axis,
        set,
    })
}

/// `text` (an example with a one-level `commir.mesh @mesh shape [8] ...`) with that mesh set to
/// `devices` when given.
fn on_devices(text: &str, devices: Option<usize>) -> String {
    match devices {
        Some(n) => rewrite_line(text, "commir.mesh @mesh shape ", |rest| {
            let tail = rest.split_once(']').map_or("", |(_, t)| t);
            format!("[{n}]{tail}")
        })
        .expect("the examples declare @mesh"),
        None => text.to_string(),
    }
}

/// The example of a GEMM shape.
fn gemm_example(
    reduce_scatter: bool,
    m: usize,
    n: usize,
    k: usize,
    devices: Option<usize>,
) -> Example {
    let (file, text) = if reduce_scatter {
        ("gemm_rs.mlir", sources::GEMM_RS)
    } else {
        ("ag_gemm.mlir", sources::AG_GEMM)
    };
    Example {
        file,
        text: on_devices(text, devices),
        devices,
        head_axis: "",
        set: vec![("m", "m", m), ("n", "n", n), ("k", "k", k)],
    }
}

/// The attention example for `shape`: `examples/attention.mlir` (MHA) or
/// `examples/attention_gqa.mlir` (GQA) with the batch, head and sequence extents (and the head
/// dimension, 128 in the examples) rewritten.
pub fn attention_operator(shape: &AttentionShape) -> Result<Operator, String> {
    attention_text(shape, &attention_example(shape, None)?)
}

fn attention_text(shape: &AttentionShape, ex: &Example) -> Result<Operator, String> {
    let set = ex.extents();
    let mut text = with_extents(&ex.text, &set)?;
    let mut extents: Vec<String> = set.iter().map(|(a, e)| format!("{a}={e}")).collect();
    if shape.head_dim != 128 {
        text = text.replace(", 128]", &format!(", {}]", shape.head_dim));
        extents.push(format!("d={}", shape.head_dim));
    }
    if shape.causal {
        text = text.replace("{causal = false}", "{causal = true}");
        extents.push("causal".into());
    }
    if let Some(n) = ex.devices {
        extents.push(format!("mesh [{n}]"));
    }
    Ok(Operator {
        text,
        origin: format!("examples/{} [{}]", ex.file, extents.join(" ")),
        head_axis: ex.head_axis,
    })
}

/// A GEMM example (`examples/ag_gemm.mlir` or `examples/gemm_rs.mlir`) with its extents
/// rewritten.
pub fn gemm_operator(reduce_scatter: bool, m: usize, n: usize, k: usize) -> Operator {
    gemm_text(&gemm_example(reduce_scatter, m, n, k, None), m, n, k)
}

fn gemm_text(ex: &Example, m: usize, n: usize, k: usize) -> Operator {
    let text = with_extents(&ex.text, &ex.extents()).expect("the GEMM examples");
    let mesh = ex
        .devices
        .map(|d| format!(" mesh [{d}]"))
        .unwrap_or_default();
    Operator {
        text,
        origin: format!("examples/{} [m={m} n={n} k={k}{mesh}]", ex.file),
        head_axis: ex.head_axis,
    }
}

/// Why the example `ex` cannot take the extents it is given, as (the `.toml` key at fault,
/// the message): a dimension its placements shard that does not divide into its shards, or an
/// axis shorter than its minimum block. `None` when it can (or when the example itself does
/// not read: the generated operator's errors then say why).
fn example_refusal(
    ex: &Example,
    table: &str,
    values: &[(&str, usize)],
) -> Option<(&'static str, String)> {
    // Parsed on one device (every extent divides it: on the topology's devices the example's
    // own extents may not, and the check would find nothing); its placements say which
    // dimensions split over the mesh, `mesh` how many ways.
    let text = match ex.devices {
        Some(_) => on_devices(&ex.text, Some(1)),
        None => ex.text.clone(),
    };
    let module = mercury_driver::Compiler::new().parse(ex.file, &text).ok()?;
    let kernel = mercury_commir::kernels(&module).ok()?.into_iter().next()?;
    let mesh: Vec<usize> = match ex.devices {
        Some(n) => vec![n],
        None => kernel.mesh.shape.clone(),
    };
    let devices: usize = mesh.iter().product();
    let given = |axis: &str| ex.set.iter().find(|s| s.0 == axis);
    let extent = |axis: &str| {
        given(axis)
            .map(|s| s.2)
            .or_else(|| kernel.axis(axis).map(|a| a.extent))
            .unwrap_or(1)
    };
    // The key and value of the description an axis comes from.
    let key = |axis: &str| -> Option<(&'static str, usize)> {
        let k = given(axis)?.1;
        Some((k, values.iter().find(|v| v.0 == k)?.1))
    };
    for b in &kernel.buffers {
        let placement = b.placement();
        for (d, levels) in b.sharding.iter().enumerate() {
            let mercury_commir::DimBinding::Axes(axes) = &b.dims[d] else {
                continue;
            };
            if levels.is_empty() || !placement.dim_is_contiguous(d) {
                continue;
            }
            let parts: usize = levels.iter().map(|l| mesh[*l]).product();
            let size: usize = axes.iter().map(|a| extent(a)).product();
            let Some((k, v)) = axes.iter().find_map(|a| key(a)) else {
                continue;
            };
            if !size.is_multiple_of(parts) {
                let over = if parts == devices && ex.devices.is_some() {
                    "one per device of the topology".to_string()
                } else if parts == devices {
                    format!("one per device of its mesh '@{}'", kernel.mesh.name)
                } else {
                    format!("over levels {levels:?} of its mesh '@{}'", kernel.mesh.name)
                };
                let dim = axes
                    .iter()
                    .map(|a| format!("@{a}"))
                    .collect::<Vec<_>>()
                    .join(" * ");
                let must = if axes.len() == 1 && size == v {
                    format!("[{table}] {k} ({v}) must be a multiple of {parts}")
                } else {
                    format!(
                        "[{table}] {k} ({v}) makes dimension {d} of '@{}' {size} long, which \
                         must be a multiple of {parts}",
                        b.name
                    )
                };
                return Some((
                    k,
                    format!(
                        "{must}: examples/{}, which the description is written into, splits \
                         dimension {d} of '@{}' ({dim}) into {parts} shards, {over}",
                        ex.file, b.name
                    ),
                ));
            }
        }
    }
    kernel.axes.iter().find_map(|a| {
        let (k, v) = key(&a.name)?;
        (a.min_block > extent(&a.name)).then(|| {
            (
                k,
                format!(
                    "[{table}] {k} ({v}) must be at least {}: examples/{}, which the description \
                     is written into, declares axis @{} with min {} (no block of it may be smaller)",
                    a.min_block, ex.file, a.name, a.min_block
                ),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_and_placements_are_rewritten() {
        let op = attention_operator(&AttentionShape {
            batch: 16,
            heads: 32,
            kv_heads: 8,
            seq: 4096,
            head_dim: 64,
            causal: true,
        })
        .unwrap();
        assert!(op.text.contains("commir.axis @b = 16 spatial"));
        assert!(op.text.contains("commir.axis @g = 4 spatial"));
        assert!(op.text.contains("commir.axis @j = 4096 managed min 128"));
        assert!(op.text.contains("@i, 64] bf16") && op.text.contains("{causal = true}"));
        assert_eq!(op.head_axis, "hk");
        assert!(with_extent(&op.text, "zz", 1).is_none());
        let g = gemm_operator(false, 64, 32, 16);
        let t = with_sharding(&g.text, "A", "[R, R]").unwrap();
        assert!(t.contains("commir.buffer @A : [@m, @k] bf16 in sharding [R, R]\n"));
        assert!(t.contains("commir.axis @k = 16 managed"));
        assert!(with_sharding(&t, "Z", "[R]").is_none());
    }

    #[test]
    fn operator_spec_errors() {
        let e = OperatorSpec::parse("[attention]\nbatch = 1", "x.toml").unwrap_err();
        assert!(e.located, "{e}");
        assert!(
            e.to_string()
                .starts_with("x.toml:1:1: error: not a valid operator file: missing field"),
            "{e}"
        );
        let e = OperatorSpec::parse("", "y.toml").unwrap_err().to_string();
        assert!(e.contains("exactly one"), "{e}");
        let ok = OperatorSpec::parse("[gemm]\nm = 4096\nn = 4096\nk = 4096\n", "z.toml").unwrap();
        assert_eq!(ok.gemm.unwrap().signature(), "gemm m4096 n4096 k4096 bf16");
        let e = OperatorSpec::parse("[gemm]\nm = 1\nn = 1\nk = 1\nvariants = 2\n", "v.toml");
        assert!(e.is_err());
        let bad = OperatorSpec {
            attention: Some(AttentionShape {
                batch: 1,
                heads: 6,
                kv_heads: 4,
                seq: 64,
                head_dim: 128,
                causal: false,
            }),
            gemm: None,
            devices: None,
        };
        assert!(bad.source().is_err());
    }

    /// Values the operator cannot hold are refused at the value, not later in the generated
    /// CommIR text (which the user never wrote).
    #[test]
    fn operator_spec_values_are_located() {
        let big = format!("[gemm]\nm = 64\nn = 64\nk = {}\n", (1u64 << 40) + 1);
        let gqa = "[attention]\nbatch = 1\nheads = 6\nkv_heads = 4\nseq = 64\nhead_dim = 128\n";
        let short = "[attention]\nbatch = 1\nheads = 4\nkv_heads = 4\nseq = 64\nhead_dim = 64\n";
        for (text, start) in [
            (
                "[gemm]\nm = 64\nn = 0\nk = 64\n",
                "x.toml:3:5: error: [gemm] n must be between 1 and",
            ),
            (big.as_str(), "x.toml:4:5: error: [gemm] k must be"),
            (
                gqa,
                "x.toml:4:12: error: [attention] heads (6) must be a multiple of kv_heads (4)",
            ),
            // Extents the example's placements or blocks cannot take, saying what must divide
            // what (they were located in the generated example text).
            (
                "[gemm]\nm = 63\nn = 32\nk = 64\n",
                "x.toml:2:5: error: [gemm] m (63) must be a multiple of 8: examples/ag_gemm.mlir, \
                 which the description is written into, splits dimension 0 of '@A' (@m) into 8 \
                 shards, one per device of its mesh '@mesh'",
            ),
            (
                "[gemm]\nm = 64\nn = 32\nk = 12\nreduce_scatter = true\n",
                "x.toml:4:5: error: [gemm] k (12)",
            ),
            (
                short,
                "x.toml:5:7: error: [attention] seq (64) must be at least 128",
            ),
        ] {
            let e = OperatorSpec::parse(text, "x.toml").unwrap_err();
            assert!(e.located && e.message.starts_with(start), "{e}");
        }
        assert!(OperatorSpec::parse(&short.replace("64\nhead", "1024\nhead"), "q.toml").is_ok());
        let both = format!("[gemm]\nm = 1\nn = 1\nk = 1\n{gqa}");
        let e = OperatorSpec::parse(&both, "t.toml").unwrap_err();
        assert!(e.located && e.message.contains("this file has both"), "{e}");
    }
}
