//! Structure-aware generation of CommIR modules for the parser target: a `commir.mesh` and a
//! `commir.kernel` with random axes (extents, kinds, `min`), buffers (dimensions bound to axes,
//! products of axes or fixed sizes; roles; shardings with contiguous, `zigzag(l)`,
//! `zigzag(l, c)` and `striped(l, b)` levels), loop nests (`parallel(l)`, `shift(@p)`), loads with index
//! expressions (`(@j + @p) mod N`, `@a * 4 + @b`), compute ops, patches and reductions or
//! stores. Symbols are sometimes quoted (`@"a b"`). The draws lean towards valid kernels, so
//! that the printer and the verifier's deeper rules are reached, but nothing forces validity:
//! edge values (0, huge extents, missing or extra indices) are drawn on purpose.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A symbol as written: `@name` or, sometimes, quoted `@"name x"`.
fn sym(rng: &mut ChaCha8Rng, base: &str) -> String {
    match rng.gen_range(0..12) {
        0 => format!("@\"{base} x\""),
        1 => format!("@\"{base}\""),
        _ => format!("@{base}"),
    }
}

/// A size: mostly small and divisible, sometimes 0, 1 or beyond every integer type.
fn size(rng: &mut ChaCha8Rng) -> String {
    match rng.gen_range(0..40) {
        0 => "0".into(),
        1 => "18446744073709551615".into(),
        2 => "9223372036854775807".into(),
        3 => "4294967296".into(),
        4 => "99999999999999999999999".into(),
        _ => [1u64, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16, 32, 64]
            .choose(rng)
            .unwrap()
            .to_string(),
    }
}

struct Axis {
    sym: String,
    extent: String,
}

struct Buffer {
    sym: String,
    /// The axes each dimension is bound to, in order (empty for a fixed size).
    axes: Vec<Vec<usize>>,
    role: &'static str,
    dtype: &'static str,
}

/// One sharding entry: `R` or `S(...)` over distinct levels, each contiguous, zigzag or
/// striped.
fn sharding_entry(rng: &mut ChaCha8Rng, levels: usize) -> String {
    if rng.gen_bool(0.5) {
        return "R".into();
    }
    let mut ls: Vec<usize> = (0..levels.max(1)).collect();
    ls.shuffle(rng);
    let n = rng.gen_range(1..=ls.len());
    let parts: Vec<String> = ls[..n]
        .iter()
        .map(|&l| {
            // Sometimes a level the mesh does not have.
            let l = if rng.gen_range(0..25) == 0 { l + 3 } else { l };
            match rng.gen_range(0..6) {
                0 => format!("zigzag({l})"),
                1 => format!("striped({l}, {})", [1, 2, 4, 0].choose(rng).unwrap()),
                2 => format!("zigzag({l}, {})", [1, 2, 0].choose(rng).unwrap()),
                _ => l.to_string(),
            }
        })
        .collect();
    format!("S({})", parts.join(", "))
}

const DTYPES: &[&str] = &["f32", "bf16", "f16", "f64"];

/// A whole module: one mesh and one kernel.
pub fn module(rng: &mut ChaCha8Rng) -> String {
    let mut out = String::new();
    let levels = rng.gen_range(1..=3usize);
    let mesh_sizes: Vec<String> = (0..levels)
        .map(|_| {
            if rng.gen_range(0..30) == 0 {
                size(rng)
            } else {
                [1, 2, 2, 3, 4].choose(rng).unwrap().to_string()
            }
        })
        .collect();
    let mesh = sym(rng, "mesh");
    out.push_str(&format!(
        "commir.mesh {mesh} shape [{}]",
        mesh_sizes.join(", ")
    ));
    if rng.gen_bool(0.5) {
        let names: Vec<String> = (0..levels).map(|l| format!("\"l{l}\"")).collect();
        out.push_str(&format!(" names [{}]", names.join(", ")));
    }
    if rng.gen_bool(0.3) {
        let bw: Vec<String> = (0..levels).map(|l| format!("{}.5", 10 + l)).collect();
        out.push_str(&format!(" bandwidth [{}]", bw.join(", ")));
    }
    out.push('\n');
    let kname = sym(rng, "k");
    out.push_str(&format!("commir.kernel {kname} on {mesh} {{\n"));
    // Axes.
    let mut axes = Vec::new();
    for a in 0..rng.gen_range(1..=5) {
        let s = sym(rng, &format!("a{a}"));
        let extent = size(rng);
        let kind = ["spatial", "spatial", "managed", "reduction"]
            .choose(rng)
            .unwrap();
        let min = if rng.gen_bool(0.2) {
            format!(" min {}", [1, 2, 4].choose(rng).unwrap())
        } else {
            String::new()
        };
        out.push_str(&format!("  commir.axis {s} = {extent} {kind}{min}\n"));
        axes.push(Axis { sym: s, extent });
    }
    // Buffers.
    let mut bufs = Vec::new();
    let nbufs = rng.gen_range(1..=4);
    for b in 0..nbufs {
        let s = sym(rng, &format!("B{b}"));
        let mut dims = Vec::new();
        let mut dim_text = Vec::new();
        for _ in 0..rng.gen_range(1..=4) {
            match rng.gen_range(0..10) {
                0 | 1 => {
                    let n = ["1", "2", "4", "16"].choose(rng).unwrap();
                    dims.push(vec![]);
                    dim_text.push(n.to_string());
                }
                2 if axes.len() >= 2 => {
                    let x = rng.gen_range(0..axes.len());
                    let y = rng.gen_range(0..axes.len());
                    dims.push(vec![x, y]);
                    dim_text.push(format!("{} * {}", axes[x].sym, axes[y].sym));
                }
                _ => {
                    let x = rng.gen_range(0..axes.len());
                    dims.push(vec![x]);
                    dim_text.push(axes[x].sym.clone());
                }
            }
        }
        let role = if b == 0 {
            "in"
        } else if b + 1 == nbufs {
            "out"
        } else {
            ["in", "out", "inout", "temp"].choose(rng).unwrap()
        };
        let dtype = DTYPES.choose(rng).unwrap();
        let sharding = if rng.gen_bool(0.6) && role != "temp" {
            let e: Vec<String> = (0..dims.len())
                .map(|_| sharding_entry(rng, levels))
                .collect();
            format!(" sharding [{}]", e.join(", "))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  commir.buffer {s} : [{}] {dtype} {role}{sharding}\n",
            dim_text.join(", ")
        ));
        bufs.push(Buffer {
            sym: s,
            axes: dims,
            role,
            dtype,
        });
    }
    if rng.gen_bool(0.15) {
        let b = bufs.choose(rng).unwrap();
        let e: Vec<String> = (0..b.axes.len())
            .map(|_| sharding_entry(rng, levels))
            .collect();
        out.push_str(&format!(
            "  commir.reshard {} to [{}]\n",
            b.sym,
            e.join(", ")
        ));
    }
    // The loop nest: up to three loops over distinct axes.
    let mut order: Vec<usize> = (0..axes.len()).collect();
    order.shuffle(rng);
    let depth = rng.gen_range(0..=order.len().min(3));
    let mut looped: Vec<(usize, bool)> = Vec::new();
    let mut indent = "  ".to_string();
    for &a in &order[..depth] {
        let par_levels: Vec<usize> = (0..levels).collect();
        let parallel_loops: Vec<usize> = looped.iter().filter(|l| l.1).map(|l| l.0).collect();
        let (attr, is_par) = match rng.gen_range(0..4) {
            0 => (
                format!(" parallel({})", par_levels.choose(rng).unwrap()),
                true,
            ),
            1 if !parallel_loops.is_empty() => (
                format!(" shift({})", axes[*parallel_loops.choose(rng).unwrap()].sym),
                false,
            ),
            _ => (String::new(), false),
        };
        out.push_str(&format!("{indent}commir.for {}{attr} {{\n", axes[a].sym));
        looped.push((a, is_par));
        indent.push_str("  ");
    }
    body(rng, &mut out, &indent, &axes, &bufs, &looped);
    for _ in 0..depth {
        indent.truncate(indent.len() - 2);
        out.push_str(&format!("{indent}}}\n"));
    }
    out.push_str("}\n");
    out
}

/// The index of one axis inside the loops `looped`: itself, or a shifted or affine expression.
fn index(rng: &mut ChaCha8Rng, a: usize, axes: &[Axis], looped: &[(usize, bool)]) -> String {
    let s = &axes[a].sym;
    if !looped.iter().any(|l| l.0 == a) || rng.gen_range(0..4) != 0 {
        return s.clone();
    }
    let others: Vec<usize> = looped.iter().map(|l| l.0).filter(|&o| o != a).collect();
    match (rng.gen_range(0..3), others.choose(rng)) {
        (0, Some(&o)) => format!("({s} + {}) mod {}", axes[o].sym, axes[a].extent),
        (1, Some(&o)) => format!("{s} * {} + {}", axes[o].extent, axes[o].sym),
        _ => format!("({s} + 1) mod {}", axes[a].extent),
    }
}

fn indices(rng: &mut ChaCha8Rng, b: &Buffer, axes: &[Axis], looped: &[(usize, bool)]) -> String {
    let mut ix: Vec<String> = b
        .axes
        .iter()
        .flatten()
        .map(|&a| index(rng, a, axes, looped))
        .collect();
    match rng.gen_range(0..30) {
        0 => {
            ix.pop();
        }
        1 => ix.push(axes[rng.gen_range(0..axes.len())].sym.clone()),
        _ => {}
    }
    ix.join(", ")
}

/// Loads, compute ops and a final reduce or store.
fn body(
    rng: &mut ChaCha8Rng,
    out: &mut String,
    ind: &str,
    axes: &[Axis],
    bufs: &[Buffer],
    looped: &[(usize, bool)],
) {
    let tile = |t: &str| format!("!commir.tile<{t}>");
    // (name, dtype) of the values in scope.
    let mut vals: Vec<(String, &'static str)> = Vec::new();
    let readable: Vec<&Buffer> = bufs.iter().filter(|b| b.role != "out").collect();
    for (n, b) in readable.iter().enumerate().take(3) {
        let name = format!("%v{n}");
        out.push_str(&format!(
            "{ind}{name} = commir.load {}[{}] : {}\n",
            b.sym,
            indices(rng, b, axes, looped),
            tile(b.dtype)
        ));
        vals.push((name, b.dtype));
    }
    for n in 0..rng.gen_range(0..5) {
        if vals.is_empty() {
            break;
        }
        let (x, tx) = vals.choose(rng).unwrap().clone();
        let (y, ty) = vals.choose(rng).unwrap().clone();
        let r = format!("%c{n}");
        let (line, t) = match rng.gen_range(0..9) {
            0 => (
                format!(
                    "commir.matmul {x}, {y}{} : ({}, {}) -> {}",
                    [" transpose_b", "", " transpose_a", ""]
                        .choose(rng)
                        .unwrap(),
                    tile(tx),
                    tile(ty),
                    tile("f32")
                ),
                "f32",
            ),
            1 => (
                format!(
                    "commir.unary {} {x} : {}",
                    ["exp", "log", "gelu", "silu"].choose(rng).unwrap(),
                    tile(tx)
                ),
                tx,
            ),
            2 => (
                format!(
                    "commir.binary {} {x}, {y} : {}",
                    ["add", "sub", "mul", "div", "max"].choose(rng).unwrap(),
                    tile(tx)
                ),
                tx,
            ),
            3 => (
                format!(
                    "commir.scale {x} by {} : {}",
                    ["0.125", "2.0", "-1.0", "1e300", "0.0"]
                        .choose(rng)
                        .unwrap(),
                    tile(tx)
                ),
                tx,
            ),
            4 => {
                let to = DTYPES.choose(rng).unwrap();
                (
                    format!("commir.cast {x} : {} to {}", tile(tx), tile(to)),
                    *to,
                )
            }
            5 => (format!("commir.mask causal {x} : {}", tile(tx)), tx),
            6 => (
                format!(
                    "commir.row_reduce {} {x} : {}",
                    ["max", "sum"].choose(rng).unwrap(),
                    tile(tx)
                ),
                tx,
            ),
            7 => (
                format!(
                    "commir.patch \"gemm\" ({x}, {y}) : ({}, {}) -> {}",
                    tile(tx),
                    tile(ty),
                    tile("f32")
                ),
                "f32",
            ),
            _ => {
                let (z, tz) = vals.choose(rng).unwrap().clone();
                let o = format!("%o{n}");
                out.push_str(&format!(
                    "{ind}{o}, {r} = commir.patch \"attention\" ({x}, {y}, {z}) {{causal = {}}} : ({}, {}, {}) -> ({}, {})\n",
                    rng.gen_bool(0.5),
                    tile(tx),
                    tile(ty),
                    tile(tz),
                    tile("f32"),
                    tile("f32")
                ));
                vals.push((o, "f32"));
                vals.push((r, "f32"));
                continue;
            }
        };
        out.push_str(&format!("{ind}{r} = {line}\n"));
        vals.push((r, t));
    }
    let outs: Vec<&Buffer> = bufs.iter().filter(|b| b.role != "in").collect();
    let (Some(b), Some((v, t))) = (outs.choose(rng), vals.last().cloned()) else {
        return;
    };
    let ix = indices(rng, b, axes, looped);
    match rng.gen_range(0..4) {
        0 => out.push_str(&format!(
            "{ind}commir.store {v} into {}[{ix}] : {}\n",
            b.sym,
            tile(t)
        )),
        1 if vals.len() >= 2 => {
            let (w, tw) = vals[vals.len() - 2].clone();
            out.push_str(&format!(
                "{ind}commir.reduce lse_merge {w}, {v} into {}[{ix}] : {}, {}\n",
                b.sym,
                tile(tw),
                tile(t)
            ))
        }
        _ => out.push_str(&format!(
            "{ind}commir.reduce add {v} into {}[{ix}] : {}\n",
            b.sym,
            tile(t)
        )),
    }
}
