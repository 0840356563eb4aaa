//! The graph-level tables of `docs/simulation.md` ("Graph level: the Llama-3 layer as one
//! module"): `mercury-study layer`. The module is `examples/llama3_layer.mlir` (Llama-3-8B) or
//! `examples/llama3_layer_70b.mlir` with the tokens (`@i`, `@j`) and the batch (`@b`)
//! rewritten; the joint pick and every 3D-parallel configuration come from
//! [`mercury_search::layer::LayerSearch`] (CommIR-generated plans, the operator search's
//! simulator), with every layer's weights charged to each device.

use mercury_search::layer::{baselines, LayerPick, LayerSearch};
use mercury_search::operator::with_extents;
use mercury_search::Topology;
use std::fmt::Write as _;

/// The Llama-3-8B layer (8 ranks).
pub const LAYER_8B: &str = include_str!("../../../../examples/llama3_layer.mlir");
/// The Llama-3-70B layer (8 ranks).
pub const LAYER_70B: &str = include_str!("../../../../examples/llama3_layer_70b.mlir");

/// The topologies of the layer tables (all of 8 devices).
pub const LAYER_TOPOLOGIES: [&str; 5] =
    ["h100-1x8", "h100-2x4", "h100-4x2", "a100-2x4", "h200-1x8"];
/// The token counts of the layer tables.
pub const LAYER_TOKENS: [usize; 3] = [4096, 32768, 131072];

/// One model of the tables: its name, module text and layer count.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    pub name: &'static str,
    pub text: &'static str,
    pub origin: &'static str,
    pub layers: u64,
}

/// Llama-3-8B (32 layers) and Llama-3-70B (80 layers).
pub const MODELS: [Model; 2] = [
    Model {
        name: "Llama-3-8B",
        text: LAYER_8B,
        origin: "examples/llama3_layer.mlir",
        layers: 32,
    },
    Model {
        name: "Llama-3-70B",
        text: LAYER_70B,
        origin: "examples/llama3_layer_70b.mlir",
        layers: 80,
    },
];

/// The search for `model` at `tokens` tokens and batch `batch` on the topology `topo`.
///
/// # Errors
/// A topology that does not load, a module the search refuses (the message).
pub fn search(
    model: &Model,
    topo: &str,
    tokens: usize,
    batch: usize,
) -> Result<LayerSearch, String> {
    search_text(model, model.text, topo, tokens, batch)
}

/// [`search`] on `text`, a variant of the model's module (another mesh).
fn search_text(
    model: &Model,
    text: &str,
    topo: &str,
    tokens: usize,
    batch: usize,
) -> Result<LayerSearch, String> {
    let t = Topology::preset(topo)
        .ok_or_else(|| format!("no topology preset '{topo}'"))?
        .map_err(|e| e.to_string())?;
    let text = with_extents(text, &[("i", tokens), ("j", tokens), ("b", batch)])?;
    let mut s = LayerSearch::new(&text, model.origin, &t).map_err(|e| e.to_string())?;
    s.layers = model.layers;
    Ok(s)
}

/// The factorizations of the 8 devices the product configurations take, `[n0, n1]`: context
/// parallelism over level 0, tensor parallelism over level 1 (TP 4 x CP 2, TP 2 x CP 4).
pub const PRODUCT_MESHES: [[usize; 2]; 2] = [[2, 4], [4, 2]];

/// `text` (a module on the one-level mesh `[8]`, sequence-sharded `S(0)`) on the two-level
/// mesh `[n0, n1]`, every `S(0)` over both levels (`S(0, 1)`: the same shards, level 0 major).
///
/// # Errors
/// A module whose mesh line is not the one-level one this rewrites.
pub fn on_two_levels(text: &str, n0: usize, n1: usize) -> Result<String, String> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("commir.mesh "))
        .ok_or("the module declares no commir.mesh")?;
    let Some(bw) = line
        .split("bandwidth [")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .filter(|_| line.contains("shape [8]"))
    else {
        return Err(format!("expected a one-level mesh of 8: {line}"));
    };
    let two = format!(
        "commir.mesh @mesh shape [{n0}, {n1}] names [\"cp\", \"tp\"] bandwidth [{bw}, {bw}]"
    );
    Ok(text.replacen(line, &two, 1).replace("S(0)", "S(0, 1)"))
}

/// The product configurations' searches of `model` at `tokens` (batch 1) on `topo`, one per
/// mesh of [`PRODUCT_MESHES`].
fn product_searches(model: &Model, topo: &str, tokens: usize) -> Vec<([usize; 2], LayerSearch)> {
    PRODUCT_MESHES
        .iter()
        .filter_map(|&[n0, n1]| {
            let text = on_two_levels(model.text, n0, n1).ok()?;
            Some(([n0, n1], search_text(model, &text, topo, tokens, 1).ok()?))
        })
        .collect()
}

fn tokens_label(t: usize) -> String {
    if t >= 1 << 20 && t.is_multiple_of(1 << 20) {
        format!("{}M", t >> 20)
    } else {
        format!("{}K", t >> 10)
    }
}

fn ms(p: &LayerPick) -> String {
    let m = p.seconds * 1e3;
    if m >= 100.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.3}")
    }
}

fn gb(b: u64) -> String {
    format!("{:.1}", b as f64 / 1e9)
}

/// The pick in short: each kernel's schedule, and its edge outputs' mode where not as declared.
pub fn summary(s: &LayerSearch, p: &LayerPick) -> String {
    p.choices
        .iter()
        .enumerate()
        .map(|(at, c)| {
            let out = &s.outs[at][c.out].name;
            let out = if out == "declared" {
                String::new()
            } else {
                format!(" -> {out}")
            };
            format!(
                "{} {}{out}",
                s.kernels()[at].name,
                s.candidates[at][c.candidate].name
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The table of `model` on `topologies` at `tokens` (batch 1): the joint pick against every
/// 3D-parallel configuration, each the fastest of its kind that fits in the topology's usable
/// HBM with the weights of all `model.layers` layers.
pub fn layer_table(
    model: &Model,
    topologies: &[&str],
    tokens: &[usize],
    product_picks: bool,
) -> String {
    let mut out = String::new();
    let names: Vec<&str> = baselines().iter().map(|b| b.name).collect();
    let _ = writeln!(
        out,
        "| topology | tokens | joint pick ms | GB/device | best 3D-parallel | its ms | its GB/device | speedup | {} | the pick |",
        names.iter().map(|n| format!("{n} ms")).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(9 + names.len()));
    for topo in topologies {
        for &t in tokens {
            let s = match search(model, topo, t, 1) {
                Ok(s) => s,
                Err(e) => {
                    let _ = writeln!(out, "| {topo} | {} | {e} |", tokens_label(t));
                    continue;
                }
            };
            let usable = s.topology().usable_hbm_bytes();
            let products = product_searches(model, topo, t);
            // The joint pick: the fastest of the searches on the one-level mesh and on each
            // product mesh (every kernel's schedule and edge placement chosen together on it).
            let mut joint: Vec<(String, &LayerSearch, LayerPick)> = Vec::new();
            let mut failed = None;
            let searched = products.iter().filter(|_| product_picks);
            for (label, ls) in std::iter::once((String::new(), &s))
                .chain(searched.map(|([n0, n1], ps)| (format!("mesh {n0}x{n1}: "), ps)))
            {
                match ls.best() {
                    Ok(p) => joint.push((label, ls, p)),
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            joint.sort_by(|a, b| a.2.seconds.total_cmp(&b.2.seconds));
            let pick: Result<&(String, &LayerSearch, LayerPick), String> = joint
                .first()
                .ok_or_else(|| failed.map_or("no search".into(), |e| e.to_string()));
            // Per configuration: its fastest fitting pick (on the product meshes, the faster
            // of the two, with its sizes), and whether any lowers at all.
            let runs =
                |b: &mercury_search::layer::Baseline, cap: u64| -> Option<(LayerPick, String)> {
                    if b.levels == 1 {
                        return s.baseline(b, cap).map(|p| (p, String::new()));
                    }
                    products
                        .iter()
                        .filter_map(|([n0, n1], ps)| {
                            Some((ps.baseline(b, cap)?, format!(" (TP{n1}xCP{n0})")))
                        })
                        .min_by(|a, b| a.0.seconds.total_cmp(&b.0.seconds))
                };
            let base: Vec<Option<(LayerPick, String)>> =
                baselines().iter().map(|b| runs(b, usable)).collect();
            let best = base
                .iter()
                .enumerate()
                .filter_map(|(i, p)| Some((i, p.as_ref()?)))
                .min_by(|a, b| a.1 .0.seconds.total_cmp(&b.1 .0.seconds))
                .map(|(i, (p, sizes))| (i, p, sizes.clone()));
            // "n/a": no choice of the configuration lowers at all (DP at batch 1).
            let cols: Vec<String> = base
                .iter()
                .zip(baselines())
                .map(|(p, b)| match p {
                    Some((p, sizes)) => format!("{}{sizes}", ms(p)),
                    None if runs(&b, u64::MAX).is_some() => "does not fit".into(),
                    None => "n/a".into(),
                })
                .collect();
            let (pick_ms, pick_gb, pick_desc) = match &pick {
                Ok((label, ls, p)) => (
                    ms(p),
                    gb(p.memory_bytes),
                    format!("{label}{}", summary(ls, p)),
                ),
                Err(e) => ("-".into(), "-".into(), e.clone()),
            };
            let (bname, bms, bgb, speed) = match (best, &pick) {
                (Some((i, b, sizes)), Ok((_, _, p))) => (
                    format!("{}{sizes}", names[i]),
                    ms(b),
                    gb(b.memory_bytes),
                    format!("{:.2}x", b.seconds / p.seconds),
                ),
                (Some((i, b, sizes)), Err(_)) => (
                    format!("{}{sizes}", names[i]),
                    ms(b),
                    gb(b.memory_bytes),
                    "-".into(),
                ),
                (None, _) => ("none fits".into(), "-".into(), "-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "| {topo} | {} | {pick_ms} | {pick_gb} | {bname} | {bms} | {bgb} | {speed} | {} | {pick_desc} |",
                tokens_label(t),
                cols.join(" | ")
            );
        }
    }
    out
}

/// The memory frontier of `model` at `tokens` tokens on `topologies`: per topology the
/// smallest plan, the fastest plan and the fastest that fits, and how many points of the
/// (latency, bytes per device) Pareto front fit, at batch 1 and at batch `batch` (one compiled
/// module of batch `m` run `batch / m` times in a row, for every `m` dividing `batch`: micro-batches
/// trade time for memory, a pass holding `m` sequences' activations; the front is over every
/// `m` and every plan).
pub fn frontier_table(model: &Model, topologies: &[&str], tokens: usize, batch: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| topology | batch | usable GB | fastest plan ms (GB/device) | smallest plan GB/device (ms) | fastest that fits ms (GB/device) | front points that fit | the fastest plan that fits |"
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(8));
    let t = |m: f64| {
        if m >= 100.0 {
            format!("{m:.1}")
        } else {
            format!("{m:.3}")
        }
    };
    for topo in topologies {
        for whole in [1, batch] {
            // (seconds for the whole batch, bytes, micro-batch, plan summary) of every point.
            let mut points: Vec<(f64, u64, usize, String)> = Vec::new();
            let mut usable = None;
            let mut failed = None;
            for m in (1..=whole).filter(|m| whole % m == 0) {
                match search(model, topo, tokens, m) {
                    Ok(s) => {
                        usable = Some(s.topology().usable_hbm_bytes());
                        for p in s.frontier(u64::MAX) {
                            let reps = (whole / m) as f64;
                            points.push((p.seconds * reps, p.memory_bytes, m, summary(&s, &p)));
                        }
                    }
                    Err(e) => failed = Some(e),
                }
            }
            let Some(usable) = usable else {
                let _ = writeln!(
                    out,
                    "| {topo} | {whole} | {} |",
                    failed.unwrap_or_else(|| "no plan lowers".into())
                );
                continue;
            };
            // The Pareto front over every micro-batch: faster first, each smaller than those
            // before it.
            points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut front: Vec<&(f64, u64, usize, String)> = Vec::new();
            for p in &points {
                if front.last().is_none_or(|q| p.1 < q.1) {
                    front.push(p);
                }
            }
            let (Some(fast), Some(small)) = (front.first(), front.last()) else {
                let _ = writeln!(out, "| {topo} | {whole} | no plan lowers |");
                continue;
            };
            let fits: Vec<_> = front.iter().filter(|p| p.1 <= usable).collect();
            let label = |p: &(f64, u64, usize, String)| {
                if whole == 1 {
                    "1".to_string()
                } else {
                    format!("{whole} ({} x {})", whole / p.2, p.2)
                }
            };
            let (fit, plan) =
                fits.first()
                    .map_or(("none fits".to_string(), "-".to_string()), |p| {
                        (
                            format!("{} ({}, {})", t(p.0 * 1e3), gb(p.1), label(p)),
                            p.3.clone(),
                        )
                    });
            let _ = writeln!(
                out,
                "| {topo} | {whole} | {} | {} ({}, {}) | {} ({}, {}) | {fit} | {} of {} | {plan} |",
                gb(usable),
                t(fast.0 * 1e3),
                gb(fast.1),
                label(fast),
                gb(small.1),
                t(small.0 * 1e3),
                label(small),
                fits.len(),
                front.len(),
            );
        }
    }
    out
}

/// Every layer table of docs/simulation.md, restricted to `topologies` and `tokens` (the
/// frontier runs at 2M tokens on the topologies given).
pub fn layer_study(topologies: &[&str], tokens: &[usize], product_picks: bool) -> String {
    let mut out = String::new();
    for m in &MODELS {
        let _ = writeln!(
            out,
            "### Graph level: the {} layer as one module, batch 1 ({}; {} layers' weights per device)\n",
            m.name, m.origin, m.layers
        );
        out += &layer_table(m, topologies, tokens, product_picks);
        out.push('\n');
    }
    out += &frontier_study(topologies, FRONTIER_TOKENS, FRONTIER_BATCH);
    out
}

/// Tokens per sequence of the memory frontier (2M).
pub const FRONTIER_TOKENS: usize = 1 << 21;
/// The batch of the memory frontier's second row per topology.
pub const FRONTIER_BATCH: usize = 16;

/// The memory frontier table of docs/simulation.md (the 8B layer) with its heading.
pub fn frontier_study(topologies: &[&str], tokens: usize, batch: usize) -> String {
    let m = &MODELS[0];
    let mut out = format!(
        "### Graph level: the {} layer at {} tokens, the memory frontier ({}; {} layers' weights per device)\n\n",
        m.name,
        tokens_label(tokens),
        m.origin,
        m.layers
    );
    out += &frontier_table(m, topologies, tokens, batch);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_two_levels_rewrites_the_mesh_and_the_token_shards() {
        let t = on_two_levels(LAYER_8B, 2, 4).unwrap();
        assert!(t.contains(
            "commir.mesh @mesh shape [2, 4] names [\"cp\", \"tp\"] bandwidth [450.0, 450.0]"
        ));
        assert!(!t.contains("S(0)") && t.contains("S(0, 1)"));
        let e = on_two_levels(&t, 4, 2).unwrap_err();
        assert!(e.contains("expected a one-level mesh of 8"), "{e}");
    }

    /// The batch row's front joins the micro-batches' plans: the whole batch at once is the
    /// fastest, one sequence a pass the smallest (its activations are half the pair's).
    #[test]
    fn the_batch_row_is_a_front_over_micro_batches() {
        let t = frontier_table(&MODELS[0], &["h100-1x8"], 4096, 2);
        let row = t
            .lines()
            .find(|l| l.starts_with("| h100-1x8 | 2 |"))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            row.contains(", 2 (1 x 2))") && row.contains(", 2 (2 x 1))"),
            "{row}"
        );
        assert!(t.lines().any(|l| l.starts_with("| h100-1x8 | 1 |")), "{t}");
    }
}
