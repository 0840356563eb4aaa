//! The schedule of each role: the primitives' script that one role per mesh level makes.

use super::{CommirSource, Op};
use mercury_commir::DimBinding;

/// The attention backward's roles (`groups` last: grouped-query attention only).
const BWD_ROLES: &[&str] = &[
    "ring",
    "ring+carry",
    "heads",
    "gather",
    "tree",
    "tree+shift(i)",
    "groups",
];

impl CommirSource {
    /// The roles tried on each mesh level, in enumeration order (`groups` only for
    /// grouped-query attention, `ax[5]` the group axis; none naming `n` for a matrix-vector
    /// product, whose `ax[2]` is "").
    pub(super) fn roles(op: Op, ax: &[String]) -> &'static [&'static str] {
        match op {
            Op::Gemm if ax.get(2).is_some_and(|n| n.is_empty()) => {
                &["m", "k", "k+shift(m)", "k+shift-halves(m)", "m+ring(k)"]
            }
            Op::Attention if ax.get(5).is_some_and(|g| !g.is_empty()) => {
                &["ring", "heads", "gather", "tree", "tree+shift(i)", "groups"]
            }
            Op::Attention => &["ring", "heads", "gather", "tree", "tree+shift(i)"],
            // The backward adds ring-flash-attn's ring, whose dK/dV accumulators travel with
            // the key/value blocks (`carry`) instead of returning by shift-reduce.
            Op::AttentionBwd if ax.get(5).is_some_and(|g| !g.is_empty()) => BWD_ROLES,
            Op::AttentionBwd => &BWD_ROLES[..BWD_ROLES.len() - 1],
            Op::Gemm => &[
                "m",
                "n",
                "k",
                "n+ring(m)",
                "k+shift(m)",
                "k+shift-halves(m)",
                "m+ring(n)",
                "m+ring(k)",
                "n+ring(k)",
                "k+shift(n)",
            ],
        }
    }

    /// The schedule script for one role per mesh level.
    pub(super) fn script(
        &self,
        op: Op,
        ax: &[String],
        shape: &[usize],
        roles: &[&str],
    ) -> Vec<String> {
        let mut s = Vec::new();
        let k = shape.len();
        match op {
            Op::Attention | Op::AttentionBwd => {
                let (h, i, j, g) = (&ax[0], &ax[1], &ax[2], &ax[5]);
                // The backward's log-sum-exp [b, h, i] moves with the queries.
                let ranks: &[usize] = if op == Op::AttentionBwd {
                    &[3, 4]
                } else {
                    &[4]
                };
                let heads: Vec<usize> = (0..k).filter(|l| roles[*l] == "heads").collect();
                let groups: Vec<usize> = (0..k).filter(|l| roles[*l] == "groups").collect();
                // The levels that split the query heads: key/value heads first (the most
                // significant part of `@hk * @g`), then the groups.
                let head_levels: Vec<usize> = heads.iter().chain(&groups).copied().collect();
                let join = |v: &[usize]| {
                    v.iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join("|")
                };
                if !head_levels.is_empty() {
                    // Move the head levels from the sequence dimension to the head dimension;
                    // key/value buffers (whose head dimension has no group axis) only to
                    // the `heads` levels: replicated over the `groups` levels.
                    let rest: Vec<usize> = (0..k).filter(|l| !head_levels.contains(l)).collect();
                    let seq = if rest.is_empty() {
                        "R".to_string()
                    } else {
                        format!("S({})", join(&rest))
                    };
                    let all = format!("S({})", join(&(0..k).collect::<Vec<_>>()));
                    for b in self.kernel.buffers.iter().filter(|b| {
                        b.sharding.get(2).is_some_and(|x| !x.is_empty())
                            && ranks.contains(&b.dims.len())
                    }) {
                        let grouped =
                            matches!(b.dims.get(1), Some(DimBinding::Axes(a)) if a.len() == 2);
                        let split = join(if grouped { &head_levels } else { &heads });
                        let hd = if split.is_empty() {
                            "R".to_string()
                        } else {
                            format!("S({split})")
                        };
                        let d = if b.dims.len() == 4 { ",R" } else { "" };
                        s.push(format!(
                            "reshard{{buffer={} sharding=R,{hd},{seq}{d}}}",
                            b.name
                        ));
                    }
                    // One parallel loop per level: `axis` tiled level by level.
                    let mut split_over = |axis: &String, levels: &[usize]| {
                        for (n, l) in levels.iter().enumerate() {
                            let cur = if n == 0 {
                                axis.clone()
                            } else {
                                format!("{axis}_r{}", n - 1)
                            };
                            let inner = if n + 1 == levels.len() {
                                format!("{axis}_t")
                            } else {
                                format!("{axis}_r{n}")
                            };
                            s.push(format!(
                                "tile{{axis={cur} factor={} outer={axis}{l} inner={inner}}}",
                                shape[*l]
                            ));
                            s.push(format!(
                                "parallelize{{axis={axis}{l} level={l} shard=false}}"
                            ));
                        }
                    };
                    split_over(h, &heads);
                    split_over(g, &groups);
                    // Outputs end in their declared placement (contiguous, zigzag or
                    // striped), as re-expressed on this mesh.
                    let declared = self.declared_on(shape);
                    for b in self.kernel.buffers.iter().filter(|b| {
                        b.role != mercury_commir::Role::In
                            && b.sharding.get(2).is_some_and(|x| !x.is_empty())
                    }) {
                        let to = declared
                            .as_ref()
                            .and_then(|k| k.buffer(&b.name))
                            .map(|d| sharding_option(&d.placement()))
                            .unwrap_or_else(|| {
                                let d = if b.dims.len() == 4 { ",R" } else { "" };
                                format!("R,R,{all}{d}")
                            });
                        s.push(format!("reshard{{buffer={} sharding={to} at=end}}", b.name));
                    }
                }
                let seq_levels: Vec<usize> = (0..k)
                    .filter(|l| matches!(roles[*l], "ring" | "ring+carry" | "gather"))
                    .collect();
                for (n, l) in seq_levels.iter().enumerate() {
                    let cur = if n == 0 {
                        i.clone()
                    } else {
                        format!("{i}_r{}", n - 1)
                    };
                    let more = roles.contains(&"tree+shift(i)");
                    let inner = if n + 1 == seq_levels.len() && !more {
                        format!("{i}_t")
                    } else {
                        format!("{i}_r{n}")
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={i}{l} inner={inner}}}",
                        shape[*l]
                    ));
                    s.push(format!("parallelize{{axis={i}{l} level={l} shard=false}}"));
                }
                let kv_levels: Vec<usize> = (0..k)
                    .filter(|l| {
                        matches!(roles[*l], "ring" | "ring+carry" | "tree" | "tree+shift(i)")
                    })
                    .collect();
                for (n, l) in kv_levels.iter().enumerate() {
                    let cur = if n == 0 {
                        j.clone()
                    } else {
                        format!("{j}_r{}", n - 1)
                    };
                    let inner = if n + 1 == kv_levels.len() {
                        format!("{j}_t")
                    } else {
                        format!("{j}_r{n}")
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={j}{l} inner={inner}}}",
                        shape[*l]
                    ));
                    if roles[*l] == "ring" {
                        s.push(format!("shift{{axis={j}{l} by={i}{l}}}"));
                    } else if roles[*l] == "ring+carry" {
                        // The own key/value block last: the accumulators end at home.
                        s.push(format!("shift{{axis={j}{l} by={i}{l} offset=1}}"));
                    } else {
                        s.push(format!("parallelize{{axis={j}{l} level={l} shard=false}}"));
                    }
                }
                // ring-flash-attn: the dK/dV accumulators (the outputs over the key
                // positions) travel with the key/value blocks.
                if roles.contains(&"ring+carry") {
                    for b in self.kernel.buffers.iter().filter(|b| {
                        b.role != mercury_commir::Role::In
                            && matches!(b.dims.get(2), Some(DimBinding::Axes(a)) if a.first() == Some(j))
                    }) {
                        s.push(format!("carry{{buffer={}}}", b.name));
                    }
                }
                // Shift-reduce of partial outputs: the key/value blocks stay, the query blocks
                // visit every rank of the level and their partial outputs (with the
                // log-sum-exp) travel to their owners; `offset=1` leaves the own block last.
                let qshift: Vec<usize> = (0..k).filter(|l| roles[*l] == "tree+shift(i)").collect();
                let done = seq_levels.len();
                for (n, l) in qshift.iter().enumerate() {
                    let cur = if done + n == 0 {
                        i.clone()
                    } else {
                        format!("{i}_r{}", done + n - 1)
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={i}{l} inner={i}_r{}}}",
                        shape[*l],
                        done + n
                    ));
                    s.push(format!("shift{{axis={i}{l} by={j}{l} offset=1}}"));
                }
            }
            Op::Gemm => {
                let (m, kk, n) = (&ax[0], &ax[1], &ax[2]);
                let mut count = std::collections::HashMap::new();
                // Tiles what is left of `axis` by `factor` into the loop `outer` (returned).
                let mut tile_by =
                    |s: &mut Vec<String>, axis: &String, outer: String, factor: usize| -> String {
                        let c = count.entry(axis.clone()).or_insert(0usize);
                        let cur = if *c == 0 {
                            axis.clone()
                        } else {
                            format!("{axis}_r{}", *c - 1)
                        };
                        s.push(format!(
                            "tile{{axis={cur} factor={factor} outer={outer} inner={axis}_r{c}}}"
                        ));
                        *c += 1;
                        outer
                    };
                // Parallel loops first (outermost), then the shifted ones inside them.
                let mut shifts = Vec::new();
                for (l, role) in roles.iter().enumerate().take(k) {
                    // `X` distributes axis X; `X+ring(Y)` / `X+shift(Y)` also shifts Y by
                    // it (inputs travel around the ring; with X the reduction, partial
                    // outputs travel to their owners).
                    let axis = |c: &str| match c {
                        "m" => m,
                        "n" => n,
                        _ => kk,
                    };
                    // `X+shift-halves(Y)`: as `X+shift(Y)`, each piece of Y computed in two
                    // halves (shift_reduce_halves.sched).
                    let (par, shifted, halves) = match role.split_once('+') {
                        None => (axis(role), None, false),
                        Some((p, rest)) => {
                            let halves = rest.starts_with("shift-halves(");
                            let y = rest
                                .trim_start_matches("ring(")
                                .trim_start_matches("shift-halves(")
                                .trim_start_matches("shift(")
                                .trim_end_matches(')');
                            (axis(p), Some(axis(y)), halves)
                        }
                    };
                    let p = tile_by(&mut s, par, format!("{par}{l}"), shape[l]);
                    s.push(format!("parallelize{{axis={p} level={l} shard=false}}"));
                    if let Some(x) = shifted {
                        // Shift-reduce (partials of m travel to their owners): the own piece
                        // last, so that every transfer overlaps a computation.
                        shifts.push((x, l, p, usize::from(par == kk), halves));
                    }
                }
                for (x, l, p, offset, halves) in shifts {
                    let name = tile_by(&mut s, x, format!("{x}{l}"), shape[l]);
                    if halves {
                        tile_by(&mut s, x, format!("{x}h{l}"), 2);
                    }
                    s.push(format!("shift{{axis={name} by={p} offset={offset}}}"));
                }
            }
        }
        s
    }

    /// Whether K/V head replication (`groups` levels) fits `roles` on `shape`: the `heads`
    /// levels must split every key/value head, one per rank. With fewer, a rank would hold
    /// several key/value heads and part of the groups of each, not the whole-group blocks
    /// its placement of `@hk * @g` names. True without `groups` levels.
    pub(super) fn replication_fits(&self, ax: &[String], shape: &[usize], roles: &[&str]) -> bool {
        let split: usize = (0..shape.len())
            .filter(|l| roles[*l] == "heads")
            .map(|l| shape[l])
            .product();
        !roles.contains(&"groups") || Some(split) == self.kernel.axis(&ax[0]).map(|a| a.extent)
    }
}

/// A placement in the `sharding=` option syntax of `reshard` (`R,R,S(zigzag(0)|zigzag(1)),R`:
/// levels of a dimension joined by `|`, a striped block after `;`).
fn sharding_option(p: &mercury_commir::Placement) -> String {
    use mercury_commir::Split;
    (0..p.levels.len())
        .map(|d| {
            let ls = p.dim(d);
            if ls.is_empty() {
                return "R".to_string();
            }
            let items: Vec<String> = ls
                .iter()
                .map(|(l, s)| match s {
                    Split::Block => l.to_string(),
                    Split::Zigzag => format!("zigzag({l})"),
                    Split::Striped(b) => format!("striped({l};{b})"),
                    Split::ZigzagChunks(c) => format!("zigzag({l};{c})"),
                })
                .collect();
            format!("S({})", items.join("|"))
        })
        .collect::<Vec<_>>()
        .join(",")
}
