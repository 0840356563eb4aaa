//! Output files of a tuning run: chosen schedule, candidate table, Pareto frontier (JSON and
//! a hand-drawn SVG), tuning-cost report and the Chrome/Perfetto trace of the chosen plan.

use crate::memory::gb;
use crate::search::{Evaluated, Status, TuneResult};
use crate::topology::Topology;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// File-name-safe version of a schedule name.
pub fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_matches('.').to_string();
    if s.is_empty() {
        "schedule".into()
    } else {
        s
    }
}

fn row(e: &Evaluated) -> serde_json::Value {
    let (status, reason) = match &e.status {
        Status::Ranked => ("ranked", String::new()),
        Status::Invalid(w) => ("invalid", w.clone()),
        Status::OverMemory(w) => ("over_memory", w.clone()),
    };
    serde_json::json!({
        "name": e.candidate.name,
        "status": status,
        "reason": reason,
        "predicted_s": e.predicted_s,
        "measured_s": e.measured_s,
        "peak_bytes": e.memory.as_ref().map(|m| m.peak_bytes),
        "usable_bytes": e.memory.as_ref().map(|m| m.usable_bytes),
        "tier_bytes": e.tier_bytes,
        "exposed_comm_fraction": e.exposed_comm,
        "stages": e.candidate.plan.num_stages(),
        "mesh": e.candidate.plan.mesh,
    })
}

/// Writes every output file into `dir` (created if needed); returns the paths written.
pub fn write_outputs(
    res: &TuneResult,
    topo: &Topology,
    dir: &Path,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, text: String| -> std::io::Result<()> {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, text)?;
        written.push(p);
        Ok(())
    };
    let chosen = &res.ranked[res.chosen];
    let to_json = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    put(
        "schedule.json",
        to_json(&serde_json::json!({
            "operator": res.report.operator,
            "topology": topo.name,
            "schedule": row(chosen),
            "transform_script": chosen.candidate.transform_script,
            "decision": res.report.decision,
        })),
    )?;
    put(
        "schedule.transform",
        chosen.candidate.transform_script.clone(),
    )?;
    put("schedule.plan.json", chosen.candidate.plan.to_json())?;
    if !chosen.candidate.annotated_ir.is_empty() {
        put(
            "schedule.commir.mlir",
            chosen.candidate.annotated_ir.clone(),
        )?;
    }
    let rows: Vec<serde_json::Value> = res.ranked.iter().map(row).collect();
    put("candidates.json", to_json(&serde_json::Value::Array(rows)))?;
    let frontier: Vec<serde_json::Value> =
        res.frontier.iter().map(|&i| row(&res.ranked[i])).collect();
    put(
        "pareto.json",
        to_json(&serde_json::json!({
            "axes": ["latency_s (measured if profiled, else predicted)", "peak_bytes per device"],
            "usable_bytes": topo.usable_hbm_bytes(),
            "frontier": frontier,
        })),
    )?;
    for &i in &res.frontier {
        let c = &res.ranked[i].candidate;
        put(
            &format!("frontier/{}.transform", file_stem(&c.name)),
            c.transform_script.clone(),
        )?;
    }
    put("pareto.svg", pareto_svg(res, topo))?;
    put(
        "tuning-report.json",
        serde_json::to_string_pretty(&res.report).unwrap_or_default(),
    )?;
    put("tuning-report.md", report_markdown(res, topo))?;
    let trace = res
        .chosen_sim
        .chrome_trace(&chosen.candidate.name, chosen.candidate.plan.num_ranks());
    put(
        "trace.json",
        serde_json::to_string(&trace).unwrap_or_default(),
    )?;
    Ok(written)
}

pub fn fmt_s(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s >= 1.0 => format!("{s:.3} s"),
        Some(s) if s >= 1e-3 => format!("{:.3} ms", s * 1e3),
        Some(s) => format!("{:.1} us", s * 1e6),
    }
}

/// Human-readable report.
pub fn report_markdown(res: &TuneResult, topo: &Topology) -> String {
    let r = &res.report;
    let mut s = String::new();
    let _ = writeln!(s, "# Tuning report\n");
    let _ = writeln!(s, "- operator: {}", r.operator);
    let _ = writeln!(
        s,
        "- topology: {} ({}), hash {}",
        topo.name,
        topo.summary(),
        r.topology_hash
    );
    let _ = writeln!(s, "- decision: {}; cache: {}", r.decision, r.cache);
    let _ = writeln!(
        s,
        "- time to first usable schedule: {}; total {}",
        fmt_s(r.time_to_first_usable_s),
        fmt_s(Some(r.total_s))
    );
    let _ = writeln!(
        s,
        "- candidates seen {}, invalid {}, pruned by memory {}, simulated {}, profiled {}, GPU seconds {:.3}",
        r.candidates_seen, r.invalid, r.pruned_memory, r.simulated, r.profiled, r.gpu_seconds
    );
    for w in &r.warnings {
        let _ = writeln!(s, "- warning: {w}");
    }
    for w in &r.source_errors {
        let _ = writeln!(s, "- source error: {w}");
    }
    let _ = writeln!(
        s,
        "\n| rank | schedule | predicted | measured | peak memory | status |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    for (i, e) in res.ranked.iter().enumerate() {
        let status = match &e.status {
            Status::Ranked if res.frontier.contains(&i) => "pareto".to_string(),
            Status::Ranked => "ranked".to_string(),
            Status::Invalid(w) => format!("invalid: {w}"),
            Status::OverMemory(w) => format!("over memory: {w}"),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            e.candidate.name,
            fmt_s(e.predicted_s),
            fmt_s(e.measured_s),
            e.memory
                .as_ref()
                .map(|m| gb(m.peak_bytes))
                .unwrap_or_default(),
            status
        );
    }
    s
}

fn nice_step(range: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Latency (ms, y) against peak memory per device (GB, x): every ranked candidate, the
/// frontier as a connected line with labels, the usable-memory limit as a dashed line, and
/// over-memory candidates as crosses on the limit's right.
pub fn pareto_svg(res: &TuneResult, topo: &Topology) -> String {
    let (w, h) = (760.0, 480.0);
    let (ml, mr, mt, mb) = (70.0, 30.0, 40.0, 55.0);
    let limit = topo.usable_hbm_bytes() as f64 / 1e9;
    // Latency unit: ms unless the values are in the seconds range.
    let max_s = res
        .ranked
        .iter()
        .filter_map(|e| e.latency())
        .fold(0.0, f64::max);
    let (unit, scale) = if max_s >= 5.0 {
        ("s", 1.0)
    } else {
        ("ms", 1e3)
    };
    let ranked: Vec<(f64, f64, &str, bool)> = res
        .ranked
        .iter()
        .enumerate()
        .filter(|(_, e)| e.status == Status::Ranked)
        .filter_map(|(i, e)| {
            e.latency().map(|l| {
                (
                    e.peak_bytes() as f64 / 1e9,
                    l * scale,
                    e.candidate.name.as_str(),
                    res.frontier.contains(&i),
                )
            })
        })
        .collect();
    let over: Vec<f64> = res
        .ranked
        .iter()
        .filter(|e| matches!(e.status, Status::OverMemory(_)))
        .map(|e| e.peak_bytes() as f64 / 1e9)
        .collect();
    let xmax_data = ranked
        .iter()
        .map(|p| p.0)
        .chain(over.iter().copied())
        .fold(0.0, f64::max);
    // Show the HBM limit on scale only when the data comes near it.
    let limit_on_scale = !over.is_empty() || xmax_data > 0.4 * limit;
    let xmax = if limit_on_scale {
        xmax_data.max(limit)
    } else {
        xmax_data.max(1e-3)
    } * 1.08;
    let ymax = ranked.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-6) * 1.12;
    let sx = |x: f64| ml + (x / xmax) * (w - ml - mr);
    let sy = |y: f64| h - mb - (y / ymax) * (h - mt - mb);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" font-size="14" text-anchor="middle">{}</text>"#,
        w / 2.0,
        esc(&format!(
            "{} on {}: latency vs memory",
            res.report.operator, topo.name
        ))
    );
    // Axes and ticks.
    let _ = writeln!(
        s,
        r#"<line x1="{ml}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{ml}" y1="{mt}" x2="{ml}" y2="{}" stroke="black"/>"#,
        h - mb,
        w - mr,
        h - mb,
        h - mb
    );
    let xs = nice_step(xmax);
    let mut x = 0.0;
    while x <= xmax + 1e-9 {
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="black"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"#,
            sx(x),
            h - mb,
            h - mb + 5.0,
            h - mb + 18.0,
            trim(x)
        );
        x += xs;
    }
    let ys = nice_step(ymax);
    let mut y = 0.0;
    while y <= ymax + 1e-12 {
        let _ = writeln!(
            s,
            r##"<line x1="{0}" y1="{1:.1}" x2="{2}" y2="{1:.1}" stroke="#ddd"/><text x="{3}" y="{4:.1}" text-anchor="end">{5}</text>"##,
            ml,
            sy(y),
            w - mr,
            ml - 6.0,
            sy(y) + 4.0,
            trim(y)
        );
        y += ys;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">peak memory per device (GB)</text>"#,
        (ml + w - mr) / 2.0,
        h - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">latency ({unit})</text>"#,
        (mt + h - mb) / 2.0,
        (mt + h - mb) / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#555" text-anchor="end">blue: Pareto frontier; grey: other ranked; red x: over memory (not simulated)</text>"##,
        w - mr,
        h - 12.0
    );
    // Memory limit.
    if limit_on_scale {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#c00" stroke-dasharray="5,4"/><text x="{3:.1}" y="{4}" fill="#c00" text-anchor="end">usable HBM {5:.0} GB</text>"##,
            sx(limit),
            mt,
            h - mb,
            sx(limit) - 4.0,
            mt + 12.0,
            limit
        );
    } else {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" fill="#c00" text-anchor="end">usable HBM {:.0} GB (off scale)</text>"##,
            w - mr,
            mt + 12.0,
            limit
        );
    }
    for &m in &over {
        let (cx, cy) = (sx(m), mt + 24.0);
        let _ = writeln!(
            s,
            r##"<path d="M{} {} l8 8 m0 -8 l-8 8" stroke="#c00"/>"##,
            cx - 4.0,
            cy - 4.0
        );
    }
    for (x, y, _, on) in &ranked {
        if !on {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#999"/>"##,
                sx(*x),
                sy(*y)
            );
        }
    }
    let mut front: Vec<&(f64, f64, &str, bool)> = ranked.iter().filter(|p| p.3).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    if front.len() > 1 {
        let pts: Vec<String> = front
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline points="{}" fill="none" stroke="#06c" stroke-width="1.5"/>"##,
            pts.join(" ")
        );
    }
    // Labels right of their points, pushed apart vertically so they never overlap.
    let mut labels: Vec<(f64, f64, f64, &str)> = front
        .iter()
        .map(|p| (sx(p.0), sy(p.1), sy(p.1) - 6.0, p.2))
        .collect();
    labels.sort_by(|a, b| a.2.total_cmp(&b.2));
    for i in 1..labels.len() {
        if labels[i].2 < labels[i - 1].2 + 13.0 {
            labels[i].2 = labels[i - 1].2 + 13.0;
        }
    }
    for (x, y, ly, name) in &labels {
        let _ = writeln!(
            s,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="#06c"/><line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{:.1}" stroke="#9bd" stroke-width="0.8"/><text x="{:.1}" y="{ly:.1}" fill="#036">{}</text>"##,
            x + 12.0,
            ly - 4.0,
            x + 14.0,
            esc(name)
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}

fn trim(x: f64) -> String {
    let t = format!("{x:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t.is_empty() || t == "-0" {
        "0".into()
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_ticks() {
        assert_eq!(file_stem("usp[r2.u4]+lean4"), "usp_r2.u4__lean4");
        assert_eq!(file_stem("../x"), "_x");
        assert_eq!(file_stem(""), "schedule");
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(76.0), 20.0);
        assert_eq!(trim(2.50), "2.5");
        assert_eq!(trim(0.0), "0");
    }
}
