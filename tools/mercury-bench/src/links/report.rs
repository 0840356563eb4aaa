//! The measured figures as text: the table `mercury-mgpu links` prints and the topology file
//! it writes (the format of `passes/search/src/topology.rs`, docs/topology.md).

use super::*;

/// The kernel module version in /proc/driver/nvidia/version's first line.
pub fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_digit())
                && w.contains('.')
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(str::to_string)
}

/// `64 KiB`, `256 MiB`, `1 GiB`.
pub fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

pub(super) fn fit_text(s: &Sweep) -> String {
    match &s.fit {
        Some(f) => format!(
            "{:.2} us + bytes / {:.1} GB/s",
            f.latency_us,
            s.method.factor() * f.gbs
        ),
        None => "-".into(),
    }
}

/// The measurements as a markdown table: GB/s per size (read + write for local copies), the
/// fit and its largest error; then both-ways rows and notes.
pub fn table(r: &LinkReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "links: {} x {}, CUDA {}{}{}; median of {} gated CUDA-event-timed runs per size ({} up to 1 MiB)",
        r.devices.len(),
        r.devices.first().map_or("?", |d| d.name.as_str()),
        r.cuda,
        r.driver
            .as_ref()
            .map(|d| format!(", driver {d}"))
            .unwrap_or_default(),
        r.nccl
            .as_ref()
            .map(|d| format!(", NCCL {d}"))
            .unwrap_or_default(),
        r.reps,
        r.reps * 5
    );
    let mut head = "| link (GB/s) |".to_string();
    let mut rule = "| --- |".to_string();
    for s in &r.sizes {
        let _ = write!(head, " {} |", size_label(*s));
        rule.push_str(" ---: |");
    }
    head.push_str(" fit: latency + bytes / bandwidth | max fit error |");
    rule.push_str(" --- | ---: |");
    let _ = writeln!(o, "{head}\n{rule}");
    for s in r.local.iter().chain(&r.pairs) {
        let mut line = format!("| {} |", s.label());
        for size in &r.sizes {
            match s.samples.iter().find(|x| x.bytes == *size) {
                Some(x) => {
                    let _ = write!(line, " {:.1} |", s.rate(x));
                }
                None => line.push_str(" - |"),
            }
        }
        let _ = write!(
            line,
            " {} | {} |",
            fit_text(s),
            s.fit
                .map_or("-".into(), |f| format!("{:.0}%", 100.0 * f.max_err))
        );
        let _ = writeln!(o, "{line}");
    }
    for b in &r.both {
        let _ = writeln!(
            o,
            "both ways at once, GPU {} <-> {}, {} at {}: {:.1} GB/s per direction",
            b.a,
            b.b,
            match b.method {
                Method::Nccl => "NCCL send/recv",
                _ => "pulled peer copies",
            },
            size_label(b.bytes),
            b.gbs
        );
    }
    for (a, b) in &r.staged {
        let _ = writeln!(
            o,
            "WARNING: GPU {a} cannot access GPU {b} (no peer access): copies are staged through host memory"
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

pub(super) fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A patch rate (TFLOP/s) as the topology file writes it: one decimal from 1 up, as before,
/// and below 1 every digit (`5e-3`): one decimal wrote a rate of 0.01 given on the command line
/// as `0.0`, which the loader refuses.
pub(super) fn rate_toml(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:e}")
    }
}

/// The topology file of `report` (see the module docs); `name` is the topology's name, `source`
/// the method its link level describes (falls back to pulled copies when NCCL was not
/// measured).
/// The measured rate tables as `[[device.rates.*_points]]` tables (nothing without them).
pub fn write_rate_points(o: &mut String, rates: &Rates) {
    for p in &rates.gemm_points {
        let _ = writeln!(o, "[[device.rates.gemm_points]]");
        let _ = writeln!(
            o,
            "m = {}\nn = {}\nk = {}\ntflops = {:.1}\n",
            p.m, p.n, p.k, p.tflops
        );
    }
    for p in &rates.attention_points {
        let _ = writeln!(o, "[[device.rates.attention_points]]");
        let _ = writeln!(
            o,
            "heads = {}\nsq = {}\nsk = {}\nd = {}\ncausal = {}\ntflops = {:.1}\n",
            p.heads, p.sq, p.sk, p.d, p.causal, p.tflops
        );
    }
}

pub fn topology_toml(report: &LinkReport, name: &str, rates: &Rates, source: LinkSource) -> String {
    let n = report.devices.len();
    let d0 = &report.devices[0];
    let hbm = median(report.local.iter().map(Sweep::bandwidth).collect());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Measured by `mercury-mgpu links`: {n} x {}, CUDA {}{}{}.",
        d0.name,
        report.cuda,
        report
            .driver
            .as_ref()
            .map(|d| format!(", driver {d}"))
            .unwrap_or_default(),
        report
            .nccl
            .as_ref()
            .map(|d| format!(", NCCL {d}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "# Sizes {} to {}, median of {} gated CUDA-event-timed runs per size after a warm-up;",
        report.sizes.first().map_or("-".into(), |s| size_label(*s)),
        report.sizes.last().map_or("-".into(), |s| size_label(*s)),
        report.reps
    );
    let _ = writeln!(
        o,
        "# each sweep fitted as latency + bytes / bandwidth (least squares on relative error)."
    );
    for s in report.local.iter().chain(&report.pairs) {
        let times: Vec<String> = s
            .samples
            .iter()
            .map(|x| format!("{} {:.1} us", size_label(x.bytes), x.us))
            .collect();
        let _ = writeln!(
            o,
            "#   {}: {} (max error {}); {}",
            s.label(),
            fit_text(s),
            s.fit
                .map_or("-".into(), |f| format!("{:.0}%", 100.0 * f.max_err)),
            times.join(", ")
        );
    }
    for b in &report.both {
        let _ = writeln!(
            o,
            "#   GPU {} <-> {} both ways at once ({:?}, {}): {:.1} GB/s per direction",
            b.a,
            b.b,
            b.method,
            size_label(b.bytes),
            b.gbs
        );
    }
    for note in &report.notes {
        let _ = writeln!(o, "# note: {note}");
    }
    let _ = writeln!(o, "name = {}", toml_str(name));
    let mut method = source.method();
    if report.pair_sweeps(method).is_empty() {
        method = Method::CopyPull;
    }
    let desc = if n > 1 {
        format!(
            "{n} x {} on one node, link level from {} (measured)",
            d0.name,
            method.describe()
        )
    } else {
        format!(
            "1 x {}: only the local copy was measured (no second GPU)",
            d0.name
        )
    };
    let _ = writeln!(o, "description = {}", toml_str(&desc));
    let _ = writeln!(o);
    let _ = writeln!(o, "[device]");
    let _ = writeln!(o, "name = {}", toml_str(&d0.name));
    let _ = writeln!(o, "hbm_gb = {:.1}", d0.total_bytes as f64 / 1e9);
    let _ = writeln!(
        o,
        "# Kept back for the CUDA context, NCCL buffers and workspaces (assumed)."
    );
    let _ = writeln!(o, "hbm_reserved_gb = 4.0");
    let _ = writeln!(
        o,
        "# Measured: median over the GPUs of the fitted device-to-device copy (read + write bytes)."
    );
    let _ = writeln!(o, "hbm_bandwidth_gbs = {hbm:.1}");
    let _ = writeln!(
        o,
        "# Measured: CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT and MULTIPROCESSOR_COUNT."
    );
    let _ = writeln!(o, "copy_engines = {}", d0.copy_engines.max(1));
    let _ = writeln!(o, "sm_count = {}", d0.sm_count);
    let _ = writeln!(o, "launch_overhead_us = 5.0");
    let _ = writeln!(o);
    let _ = writeln!(o, "[device.rates]");
    let _ = writeln!(o, "# {}", rates.origin);
    let _ = writeln!(o, "gemm_tflops = {}", rate_toml(rates.gemm_tflops));
    let _ = writeln!(
        o,
        "attention_tflops = {}",
        rate_toml(rates.attention_tflops)
    );
    let _ = writeln!(
        o,
        "attention_causal_tflops = {}",
        rate_toml(rates.attention_causal_tflops)
    );
    let _ = writeln!(o);
    write_rate_points(&mut o, rates);
    let _ = writeln!(o, "[environment]");
    if let Some(d) = &report.driver {
        let _ = writeln!(o, "driver = {}", toml_str(d));
    }
    let _ = writeln!(o, "cuda = {}", toml_str(&report.cuda));
    if let Some(v) = &report.nccl {
        let _ = writeln!(o, "nccl = {}", toml_str(v));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "[[levels]]");
    let _ = writeln!(o, "name = \"gpu\"");
    let _ = writeln!(o, "size = {n}");
    let sweeps = report.pair_sweeps(method);
    if sweeps.is_empty() {
        let lat = median(report.local.iter().map(Sweep::latency_us).collect());
        let _ = writeln!(
            o,
            "link = \"none measured: one GPU (size 1, so this level's link is never used)\""
        );
        let _ = writeln!(
            o,
            "# No pair to measure: the local one-way copy rate and latency stand in (validation needs"
        );
        let _ = writeln!(
            o,
            "# positive numbers); replace them when this file describes more GPUs."
        );
        let _ = writeln!(o, "bandwidth_gbs = {:.1}", hbm / 2.0);
        let _ = writeln!(o, "efficiency = 1.0");
        let _ = writeln!(o, "latency_us = {:.2}", lat.max(0.0));
    } else {
        let bws: Vec<f64> = sweeps.iter().map(|s| s.bandwidth()).collect();
        let (lo, hi) = (
            bws.iter().copied().fold(f64::INFINITY, f64::min),
            bws.iter().copied().fold(0.0, f64::max),
        );
        let bw = median(bws);
        let lat = median(sweeps.iter().map(|s| s.latency_us()).collect());
        let _ = writeln!(
            o,
            "link = {}",
            toml_str(&format!(
                "{}: min {lo:.1} / median {bw:.1} / max {hi:.1} GB/s one way{}",
                method.describe(),
                if report.staged.is_empty() {
                    String::new()
                } else {
                    format!(", {} pair(s) without peer access", report.staged.len())
                }
            ))
        );
        if hi > 1.25 * lo {
            let _ = writeln!(
                o,
                "# WARNING: pairs differ by more than 25%: the GPUs are not uniformly linked; split them"
            );
            let _ = writeln!(o, "# into levels by hand (see the per-pair figures above).");
        }
        let _ = writeln!(
            o,
            "# Measured: median over pairs of the fitted bandwidth and latency (efficiency 1: the"
        );
        let _ = writeln!(o, "# figure is already what transfers reach).");
        let _ = writeln!(o, "bandwidth_gbs = {bw:.1}");
        let _ = writeln!(o, "efficiency = 1.0");
        let _ = writeln!(o, "latency_us = {:.2}", lat.max(0.0));
    }
    o
}
