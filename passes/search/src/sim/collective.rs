//! Collectives as flows: the algorithm NCCL would run, lowered to phases of concurrent flows.
//!
//! - A group whose members differ at a single mesh level runs a *ring* (members in device
//!   order). The `n - 1` ring steps are collapsed into one phase: each member sends the
//!   step bytes `n - 1` times to its successor and pays `n - 1` latencies. Under a fluid
//!   model this equals the step-by-step ring when the steps are symmetric, with far fewer
//!   events.
//! - A group spanning several levels runs *hierarchically*: split it by the slowest level it
//!   spans into equal parts; all-gather = inter-part all-gather among same-position members,
//!   then intra-part all-gather; reduce-scatter = intra first, then inter; all-reduce =
//!   intra reduce-scatter, inter all-reduce on the shard, intra all-gather. Parts of unequal
//!   size fall back to a flat ring.
//! - All-to-all: one phase, every member sends `1/n` of its buffer to every other member.
//! - Broadcast: a pipelined chain from the root (each link carries the whole buffer once).
//! - Reduce: the same chain reversed, ending at the root (NCCL's ring reduce: every other
//!   member passes the whole buffer on once, the root only receives).

use super::network::{run_jobs, Flow, Job};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// What a collective does, with the bytes that define its size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CollectiveKind {
    /// Each member contributes `bytes` (the result is `n * bytes`).
    AllGather { bytes: f64 },
    /// Each member holds `bytes` (the whole buffer) and keeps `bytes / n`.
    ReduceScatter { bytes: f64 },
    /// Each member holds and receives `bytes`.
    AllReduce { bytes: f64 },
    /// Each member sends `bytes / n` to every member.
    AllToAll { bytes: f64 },
    /// The root's `bytes` reach every member. `root` is the root's device id (a member of the
    /// group, not a position in it).
    Broadcast { bytes: f64, root: usize },
    /// Every member's `bytes` are summed into the root's. `root` is the root's device id (a
    /// member of the group, not a position in it).
    Reduce { bytes: f64, root: usize },
}

impl CollectiveKind {
    pub fn name(&self) -> &'static str {
        match self {
            CollectiveKind::AllGather { .. } => "all_gather",
            CollectiveKind::ReduceScatter { .. } => "reduce_scatter",
            CollectiveKind::AllReduce { .. } => "all_reduce",
            CollectiveKind::AllToAll { .. } => "all_to_all",
            CollectiveKind::Broadcast { .. } => "broadcast",
            CollectiveKind::Reduce { .. } => "reduce",
        }
    }
}

type Phases = Vec<Vec<Flow>>;

/// Levels at which members of `group` differ, slowest first.
fn spanned_levels(topo: &Topology, group: &[usize]) -> Vec<usize> {
    let mut levels: Vec<usize> = Vec::new();
    for w in group.windows(2) {
        if let Some(l) = topo.tier(w[0], w[1]) {
            if !levels.contains(&l) {
                levels.push(l);
            }
        }
    }
    // Members may also differ at faster levels than any consecutive pair shows; check all.
    for (i, &a) in group.iter().enumerate() {
        for &b in &group[i + 1..] {
            if let Some(l) = topo.tier(a, b) {
                if !levels.contains(&l) {
                    levels.push(l);
                }
            }
        }
    }
    levels.sort_unstable();
    levels
}

/// Splits a (sorted) group by the unit of `level` its members belong to; None unless the
/// parts are equal in size.
fn split(topo: &Topology, group: &[usize], level: usize) -> Option<Vec<Vec<usize>>> {
    let per_unit = topo.devices_per_unit(level);
    let mut parts: Vec<(usize, Vec<usize>)> = Vec::new();
    for &g in group {
        let unit = g / per_unit;
        match parts.iter_mut().find(|(u, _)| *u == unit) {
            Some((_, v)) => v.push(g),
            None => parts.push((unit, vec![g])),
        }
    }
    let k = parts.first()?.1.len();
    if parts.len() < 2 || parts.iter().any(|(_, v)| v.len() != k) {
        return None;
    }
    Some(parts.into_iter().map(|(_, v)| v).collect())
}

/// Ring over `group` (already sorted), each member sending `per_step` bytes `steps` times.
fn ring(topo: &Topology, group: &[usize], per_step: f64, steps: usize) -> Phases {
    let n = group.len();
    if n < 2 || steps == 0 {
        return vec![];
    }
    let lat = (0..n)
        .filter_map(|i| topo.tier(group[i], group[(i + 1) % n]))
        .map(|l| topo.latency(l))
        .fold(0.0, f64::max);
    let flows = (0..n)
        .map(|i| Flow {
            src: group[i],
            dst: group[(i + 1) % n],
            bytes: per_step * steps as f64,
            latency: lat * steps as f64,
            copy_engine: false,
        })
        .collect();
    vec![flows]
}

/// Runs several sub-collectives side by side: phase `i` of the result is the union of the
/// parts' phase `i`.
fn parallel(parts: Vec<Phases>) -> Phases {
    let depth = parts.iter().map(Vec::len).max().unwrap_or(0);
    (0..depth)
        .map(|i| {
            parts
                .iter()
                .filter_map(|p| p.get(i))
                .flat_map(|ph| ph.iter().cloned())
                .collect()
        })
        .collect()
}

fn all_gather(topo: &Topology, group: &[usize], bytes: f64) -> Phases {
    let n = group.len();
    let levels = spanned_levels(topo, group);
    if levels.len() > 1 {
        if let Some(parts) = split(topo, group, levels[0]) {
            let k = parts[0].len();
            let inter: Vec<Phases> = (0..k)
                .map(|j| {
                    let col: Vec<usize> = parts.iter().map(|p| p[j]).collect();
                    all_gather(topo, &col, bytes)
                })
                .collect();
            let m = parts.len() as f64;
            let intra: Vec<Phases> = parts
                .iter()
                .map(|p| all_gather(topo, p, bytes * m))
                .collect();
            let mut out = parallel(inter);
            out.extend(parallel(intra));
            return out;
        }
    }
    ring(topo, group, bytes, n.saturating_sub(1))
}

fn reduce_scatter(topo: &Topology, group: &[usize], bytes: f64) -> Phases {
    let n = group.len();
    let levels = spanned_levels(topo, group);
    if levels.len() > 1 {
        if let Some(parts) = split(topo, group, levels[0]) {
            let k = parts[0].len();
            let intra: Vec<Phases> = parts
                .iter()
                .map(|p| reduce_scatter(topo, p, bytes))
                .collect();
            let inter: Vec<Phases> = (0..k)
                .map(|j| {
                    let col: Vec<usize> = parts.iter().map(|p| p[j]).collect();
                    reduce_scatter(topo, &col, bytes / k as f64)
                })
                .collect();
            let mut out = parallel(intra);
            out.extend(parallel(inter));
            return out;
        }
    }
    ring(topo, group, bytes / n as f64, n.saturating_sub(1))
}

fn all_reduce(topo: &Topology, group: &[usize], bytes: f64) -> Phases {
    let n = group.len();
    let levels = spanned_levels(topo, group);
    if levels.len() > 1 {
        if let Some(parts) = split(topo, group, levels[0]) {
            let k = parts[0].len();
            let rs: Vec<Phases> = parts
                .iter()
                .map(|p| reduce_scatter(topo, p, bytes))
                .collect();
            let ar: Vec<Phases> = (0..k)
                .map(|j| {
                    let col: Vec<usize> = parts.iter().map(|p| p[j]).collect();
                    all_reduce(topo, &col, bytes / k as f64)
                })
                .collect();
            let ag: Vec<Phases> = parts
                .iter()
                .map(|p| all_gather(topo, p, bytes / k as f64))
                .collect();
            let mut out = parallel(rs);
            out.extend(parallel(ar));
            out.extend(parallel(ag));
            return out;
        }
    }
    ring(topo, group, bytes / n as f64, 2 * n.saturating_sub(1))
}

fn all_to_all(topo: &Topology, group: &[usize], bytes: f64) -> Phases {
    let n = group.len();
    if n < 2 {
        return vec![];
    }
    let mut flows = Vec::with_capacity(n * (n - 1));
    for &a in group {
        for &b in group {
            if a != b {
                let lat = topo.tier(a, b).map(|l| topo.latency(l)).unwrap_or(0.0);
                flows.push(Flow {
                    src: a,
                    dst: b,
                    bytes: bytes / n as f64,
                    latency: lat,
                    copy_engine: false,
                });
            }
        }
    }
    vec![flows]
}

fn broadcast(topo: &Topology, group: &[usize], bytes: f64, root: usize) -> Phases {
    let n = group.len();
    if n < 2 {
        return vec![];
    }
    // Chain starting at the root, following device order.
    let start = group.iter().position(|&g| g == root).unwrap_or(0);
    let chain: Vec<usize> = (0..n).map(|i| group[(start + i) % n]).collect();
    pipelined_chain(topo, &chain, bytes)
}

/// One phase: every link of `chain` (devices in order) carries the whole buffer at once, each
/// waiting the slowest link's latency once per hop (the pipeline fills along the chain).
fn pipelined_chain(topo: &Topology, chain: &[usize], bytes: f64) -> Phases {
    let hops = chain.len().saturating_sub(1) as f64;
    let lat = chain
        .windows(2)
        .filter_map(|w| topo.tier(w[0], w[1]))
        .map(|l| topo.latency(l))
        .fold(0.0, f64::max);
    let flows = chain
        .windows(2)
        .map(|w| Flow {
            src: w[0],
            dst: w[1],
            bytes,
            latency: lat * hops,
            copy_engine: false,
        })
        .collect();
    vec![flows]
}

/// A chain through `group` (sorted device ids) in device order ending at `root` (a device id;
/// the chain starts after it), each link carrying the whole buffer: a pipelined reduce.
fn reduce(topo: &Topology, group: &[usize], bytes: f64, root: usize) -> Phases {
    let n = group.len();
    if n < 2 {
        return vec![];
    }
    let at = group.iter().position(|&g| g == root).unwrap_or(0);
    let chain: Vec<usize> = (1..=n).map(|i| group[(at + i) % n]).collect();
    pipelined_chain(topo, &chain, bytes)
}

/// The job a collective over `group` (device ids, any order) becomes. The launch overhead of
/// the collective call is added to the first phase.
pub fn collective_job(topo: &Topology, group: &[usize], kind: CollectiveKind) -> Job {
    let mut g: Vec<usize> = group.to_vec();
    g.sort_unstable();
    g.dedup();
    let mut phases = match kind {
        CollectiveKind::AllGather { bytes } => all_gather(topo, &g, bytes),
        CollectiveKind::ReduceScatter { bytes } => reduce_scatter(topo, &g, bytes),
        CollectiveKind::AllReduce { bytes } => all_reduce(topo, &g, bytes),
        CollectiveKind::AllToAll { bytes } => all_to_all(topo, &g, bytes),
        CollectiveKind::Broadcast { bytes, root } => broadcast(topo, &g, bytes, root),
        CollectiveKind::Reduce { bytes, root } => reduce(topo, &g, bytes, root),
    };
    phases.retain(|p| !p.is_empty());
    if let Some(first) = phases.first_mut() {
        for f in first.iter_mut() {
            f.latency += topo.launch_overhead();
        }
    }
    Job { phases }
}

/// Seconds one collective takes on an idle machine (used for resharding costs).
pub fn price_collective(topo: &Topology, group: &[usize], kind: CollectiveKind) -> f64 {
    let job = collective_job(topo, group, kind);
    let (done, _) = run_jobs(topo, &[job], 0.0);
    done[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100(shape: &str) -> Topology {
        Topology::preset(&format!("h100-{shape}")).unwrap().unwrap()
    }

    #[test]
    fn flat_ring_allgather_matches_closed_form() {
        let t = h100("1x8");
        let g: Vec<usize> = (0..8).collect();
        let s = 64e6;
        let got = price_collective(&t, &g, CollectiveKind::AllGather { bytes: s });
        let want = t.launch_overhead() + 7.0 * t.latency(1) + 7.0 * s / t.bandwidth(1);
        assert!((got - want).abs() / want < 1e-9, "{got} vs {want}");
        let ar = price_collective(&t, &g, CollectiveKind::AllReduce { bytes: 8.0 * s });
        let want = t.launch_overhead() + 14.0 * t.latency(1) + 14.0 * s / t.bandwidth(1);
        assert!((ar - want).abs() / want < 1e-9, "{ar} vs {want}");
    }

    #[test]
    fn hierarchical_allgather_beats_flat_ring_over_a_shared_nic() {
        let t = h100("2x4");
        let g: Vec<usize> = (0..8).collect();
        let s = 64e6;
        let hier = price_collective(&t, &g, CollectiveKind::AllGather { bytes: s });
        // Flat ring: the NIC edge carries 7 chunks; hierarchical: 4 chunks (one per GPU).
        let flat = 7.0 * s / t.bandwidth(0);
        let nic = 4.0 * s / t.bandwidth(0);
        assert!(hier < flat, "{hier} vs flat {flat}");
        assert!(hier > nic, "{hier} must include the NIC time {nic}");
        let intra = 3.0 * 2.0 * s / t.bandwidth(1);
        assert!(hier < nic + intra + 1e-3);
    }

    #[test]
    fn alltoall_across_nodes_is_nic_bound() {
        let t = h100("2x4");
        let g: Vec<usize> = (0..8).collect();
        let s = 80e6;
        let got = price_collective(&t, &g, CollectiveKind::AllToAll { bytes: s });
        // Each GPU sends half of its buffer to the other node: 4 * s/2 through one NIC.
        let want = 4.0 * s / 2.0 / t.bandwidth(0);
        assert!(got >= want && got < want * 1.01 + 1e-4, "{got} vs {want}");
        // Inside a node it is far cheaper.
        let intra = price_collective(&t, &[0, 1, 2, 3], CollectiveKind::AllToAll { bytes: s });
        assert!(intra * 20.0 < got);
    }

    /// A reduce of S bytes over 8 GPUs of one node: a chain of 7 links, each carrying S
    /// (pipelined: the time of one link), ending at the root; half an all-reduce's time of
    /// the same buffer in bytes (2 (n - 1) / n x S per member for the all-reduce).
    #[test]
    fn reduce_is_a_chain_into_the_root() {
        let t = h100("1x8");
        let g: Vec<usize> = (0..8).collect();
        let s = 64e6;
        for root in [0, 5] {
            let job = collective_job(&t, &g, CollectiveKind::Reduce { bytes: s, root });
            assert_eq!(job.phases.len(), 1);
            let flows = &job.phases[0];
            assert_eq!(flows.len(), 7);
            assert!(flows.iter().all(|f| f.src != root), "root {root} sends");
            assert_eq!(flows.last().map(|f| f.dst), Some(root));
            let got = price_collective(&t, &g, CollectiveKind::Reduce { bytes: s, root });
            let want = t.launch_overhead() + 7.0 * t.latency(1) + s / t.bandwidth(1);
            assert!((got - want).abs() / want < 1e-9, "{got} vs {want}");
        }
    }

    #[test]
    fn trivial_groups_cost_nothing() {
        let t = h100("2x4");
        assert_eq!(
            price_collective(&t, &[3], CollectiveKind::AllReduce { bytes: 1e9 }),
            0.0
        );
        let b = price_collective(
            &t,
            &[0, 1],
            CollectiveKind::Broadcast {
                bytes: 1e8,
                root: 1,
            },
        );
        assert!(b > 1e8 / t.bandwidth(1));
    }
}
