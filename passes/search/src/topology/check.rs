//! Validation of a topology: every value in range and consistent, refused at its place in the file.

use super::*;

impl Topology {
    /// [`Topology::validate`], with the place in the file of what is wrong.
    pub(super) fn check(&self) -> Result<(), Invalid> {
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
pub(super) struct Invalid {
    pub(super) message: String,
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
    pub(super) fn diagnostic(&self, origin: &str, text: &str) -> mercury_ir::Diagnostic {
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
