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
        "stages": e.stages,
        "template": crate::templates::template_of(&e.candidate.name),
        "mesh": e.candidate.plan.mesh,
    })
}

/// The output files a run writes only sometimes: `schedule.commir.mlir` (when the pick has
/// annotated IR), `profile.json` (with `--profile-top`) and `operator.mlir` (mercury-tune, for
/// a `.toml` operator). [`write_outputs`] removes them from `dir` first.
pub const OPTIONAL_OUTPUTS: [&str; 3] = ["schedule.commir.mlir", "profile.json", "operator.mlir"];

/// Writes every output file into `dir` (created if needed); returns the paths written. The
/// folders `frontier/` and `templates/` and the [`OPTIONAL_OUTPUTS`] of an earlier run in the
/// same `dir` are removed first.
pub fn write_outputs(
    res: &TuneResult,
    topo: &Topology,
    dir: &Path,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // The folders of schedules are rewritten whole: an earlier run's files in the same `dir`
    // would otherwise stay beside this run's and be taken for its own.
    for sub in ["frontier", "templates"] {
        let p = dir.join(sub);
        if p.is_dir() {
            std::fs::remove_dir_all(&p)?;
        }
    }
    // So are the files only some runs write (an earlier `.toml` run's operator, an earlier
    // profiled run's measurements): left, they would describe another run.
    for file in OPTIONAL_OUTPUTS {
        let p = dir.join(file);
        if p.is_file() {
            std::fs::remove_file(&p)?;
        }
    }
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
            "template": crate::templates::template_of(&chosen.candidate.name),
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
    // Every ranked candidate that is a known template, so that templates and the pick can be
    // run side by side (the two-tier table of docs/multi-gpu.md does).
    for e in &res.ranked {
        if matches!(e.status, Status::Ranked)
            && crate::templates::template_of(&e.candidate.name).is_some()
        {
            put(
                &format!("templates/{}.transform", file_stem(&e.candidate.name)),
                e.candidate.transform_script.clone(),
            )?;
        }
    }
    put("pareto.svg", pareto_svg(res, topo))?;
    put(
        "tuning-report.json",
        serde_json::to_string_pretty(&res.report).unwrap_or_default(),
    )?;
    put("tuning-report.md", report_markdown(res, topo))?;
    if let Some(p) = &res.report.profile {
        put(
            "profile.json",
            serde_json::to_string_pretty(p).unwrap_or_default(),
        )?;
    }
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
    if !r.skipped.is_empty() {
        let n: usize = r.skipped.iter().map(|x| x.1).sum();
        let _ = writeln!(
            s,
            "- skipped: {n} candidate(s) refused by the primitives or the lowering (each one in tuning-report.json):"
        );
        for (why, k) in &r.skipped {
            let _ = writeln!(s, "  - {k} x {why}");
        }
    }
    if let Some(p) = &r.profile {
        let _ = writeln!(s, "\n## Profiling ({})\n", p.backend);
        let _ = writeln!(
            s,
            "- model pick: {}; measured pick: {}; model pick within 5%: {}",
            p.model_pick,
            p.measured_pick.as_deref().unwrap_or("-"),
            match p.model_pick_within(0.05) {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
        let _ = writeln!(
            s,
            "- Kendall tau (predicted vs measured): {}; median |predicted/measured - 1|: {}",
            p.kendall_tau
                .map(|t| format!("{t:.3}"))
                .unwrap_or_else(|| "-".into()),
            p.median_abs_error
                .map(|e| format!("{:.1}%", e * 100.0))
                .unwrap_or_else(|| "-".into())
        );
        let _ = writeln!(
            s,
            "- time to the first measured schedule: {}; {} spent: {:.3}",
            fmt_s(p.time_to_first_measured_s),
            if p.on_gpu {
                "GPU-seconds"
            } else {
                "CPU-seconds (no GPU)"
            },
            p.device_seconds
        );
        let _ = writeln!(
            s,
            "\n| model rank | schedule | template | predicted | measured | note |"
        );
        let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
        for row in &p.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                row.model_rank,
                row.name,
                row.template.as_deref().unwrap_or("new schedule"),
                fmt_s(Some(row.predicted_s)),
                fmt_s(row.measured_s),
                row.failure.as_deref().unwrap_or("")
            );
        }
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

/// The points of a Pareto plot, in plot units.
struct ParetoPoints<'a> {
    /// (GB, latency, name, on the frontier) of every ranked candidate.
    ranked: Vec<(f64, f64, &'a str, bool)>,
    /// GB of every candidate over memory (not simulated).
    over: Vec<f64>,
    /// Usable HBM per device (GB), and whether the x range reaches it.
    limit: f64,
    limit_on_scale: bool,
    xmax: f64,
    ymax: f64,
    unit: &'static str,
}

/// Latency (y) against peak memory per device (GB, x), drawn with `plotters` (SVG backend,
/// text left to the SVG renderer: no font is loaded): every ranked candidate, the frontier
/// as a connected line with labels, the usable-memory limit as a dashed line, over-memory
/// candidates as crosses along the top, and a legend inside the plot area.
pub fn pareto_svg(res: &TuneResult, topo: &Topology) -> String {
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
    // Head room above the points for the legend.
    let ymax = ranked.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-6) * 1.35;
    let points = ParetoPoints {
        ranked,
        over,
        limit,
        limit_on_scale,
        xmax,
        ymax,
        unit,
    };
    let title = format!(
        "{} on {}: latency vs memory",
        res.report.operator, topo.name
    );
    let mut svg = String::new();
    // The plotting library's axis ticks do not end on a range that is not finite.
    if !(points.xmax.is_finite() && points.ymax.is_finite()) {
        tracing::warn!("no Pareto plot: the figures are not finite");
        return svg;
    }
    if let Err(e) = draw_pareto(&mut svg, &title, &points) {
        tracing::warn!("drawing the Pareto plot failed: {e}");
    }
    svg
}

fn draw_pareto(svg: &mut String, title: &str, p: &ParetoPoints<'_>) -> Result<(), String> {
    use plotters::prelude::*;
    let grey = RGBColor(0x99, 0x99, 0x99);
    let blue = RGBColor(0x00, 0x66, 0xcc);
    let dark = RGBColor(0x00, 0x33, 0x66);
    let red = RGBColor(0xcc, 0x00, 0x00);
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    let root = SVGBackend::with_string(svg, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 15))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..p.xmax, 0f64..p.ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("peak memory per device (GB)")
        .y_desc(format!("latency ({})", p.unit))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(e)?;
    let limit_label = if p.limit_on_scale {
        format!("usable HBM {:.0} GB", p.limit)
    } else {
        format!("usable HBM {:.0} GB (off scale)", p.limit)
    };
    let limit_line = if p.limit_on_scale {
        vec![(p.limit, 0.0), (p.limit, p.ymax)]
    } else {
        vec![]
    };
    chart
        .draw_series(DashedLineSeries::new(limit_line, 5, 4, red.stroke_width(1)))
        .map_err(e)?
        .label(limit_label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], red));
    let top = p.ymax * 0.96;
    chart
        .draw_series(p.over.iter().map(|&m| Cross::new((m, top), 4, red)))
        .map_err(e)?
        .label("over memory (not simulated)")
        .legend(move |(x, y)| Cross::new((x + 8, y), 4, red));
    chart
        .draw_series(
            p.ranked
                .iter()
                .filter(|q| !q.3)
                .map(|q| Circle::new((q.0, q.1), 3, grey.filled())),
        )
        .map_err(e)?
        .label("other ranked candidates")
        .legend(move |(x, y)| Rectangle::new([(x + 5, y - 3), (x + 11, y + 3)], grey.filled()));
    let mut front: Vec<&(f64, f64, &str, bool)> = p.ranked.iter().filter(|q| q.3).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart
        .draw_series(LineSeries::new(
            front.iter().map(|q| (q.0, q.1)),
            blue.stroke_width(2),
        ))
        .map_err(e)?
        .label("Pareto frontier")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], blue.stroke_width(2)));
    chart
        .draw_series(
            front
                .iter()
                .map(|q| Circle::new((q.0, q.1), 4, blue.filled())),
        )
        .map_err(e)?;
    // Frontier labels right of their points, pushed apart vertically so they never overlap.
    let mut labels: Vec<((i32, i32), i32, &str)> = front
        .iter()
        .map(|q| {
            let at = chart.backend_coord(&(q.0, q.1));
            (at, at.1 - 6, q.2)
        })
        .collect();
    labels.sort_by_key(|l| l.1);
    for i in 1..labels.len() {
        labels[i].1 = labels[i].1.max(labels[i - 1].1 + 13);
    }
    for ((x, y), ly, name) in labels {
        root.draw(&PathElement::new(
            vec![(x, y), (x + 12, ly - 4)],
            RGBColor(0x99, 0xbb, 0xdd),
        ))
        .map_err(e)?;
        root.draw(&Text::new(
            name.to_string(),
            (x + 14, ly - 10),
            ("sans-serif", 11).into_font().color(&dark),
        ))
        .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(0xbb, 0xbb, 0xbb))
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        assert_eq!(file_stem("usp[r2.u4]+lean4"), "usp_r2.u4__lean4");
        assert_eq!(file_stem("../x"), "_x");
        assert_eq!(file_stem(""), "schedule");
    }
}
