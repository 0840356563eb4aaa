//! The cost model: a discrete-event simulation of a [`Plan`] on a [`Topology`].
//!
//! Ranks run stage by stage. Inside a stage each rank's compute ops run back to back on its
//! compute stream (durations from [`compute::op_cost`]) while all its comm ops start at the
//! stage's beginning and share the links (flow-level simulation with contention,
//! [`network::run_jobs`]; collectives as in [`collective`]). A rank is done with a stage when
//! both its compute and every transfer it takes part in are; the stage ends with a barrier
//! (the slowest rank) plus one message latency of the slowest tier the stage's transfers
//! cross (nothing for a stage without transfers: `stage_sync`). Pipeline
//! fill and drain fall out of this: the first and last stages usually have nothing to overlap.
//!
//! Plan rank `r` runs on physical device `r` (row-major over the topology levels).

pub mod collective;
pub mod compute;
pub mod network;

use crate::topology::Topology;
use collective::{collective_job, CollectiveKind};
use compute::{op_cost, view_bytes};
use mercury_plan::{Collective, CommOp, Plan};
use network::{run_jobs, Flow, Job};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("plan '{plan}' has {ranks} ranks but topology '{topology}' has {devices} devices")]
    TooManyRanks {
        plan: String,
        ranks: usize,
        topology: String,
        devices: usize,
    },
    #[error("rank {rank}: {what}")]
    Op { rank: usize, what: String },
    #[error("stage {stage}: {what}")]
    Comm { stage: usize, what: String },
}

/// A slice of the per-rank timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub name: String,
    /// "compute" or "comm".
    pub cat: String,
    pub rank: usize,
    /// 0 = compute stream; 1 + i = the i-th comm op of the stage.
    pub lane: usize,
    pub start: f64,
    pub dur: f64,
    pub stage: usize,
    pub args: serde_json::Value,
}

/// Timing of one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTiming {
    pub start: f64,
    pub end: f64,
    /// Longest compute of any rank, and the latest transfer completion (relative to start).
    pub compute: f64,
    pub comm: f64,
    /// The rank that finished last.
    pub critical_rank: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulation {
    /// Predicted end-to-end latency, seconds.
    pub latency: f64,
    pub stages: Vec<StageTiming>,
    /// Seconds each rank spends computing, and seconds each rank has a transfer in flight.
    pub compute_busy: Vec<f64>,
    pub comm_busy: Vec<f64>,
    /// Bytes moved over each topology level (index = level, slowest first).
    pub tier_bytes: Vec<f64>,
    pub flops: f64,
    /// Filled when `SimOptions::trace` is set.
    pub events: Vec<TraceEvent>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Record a per-op timeline (for Chrome/Perfetto traces).
    pub trace: bool,
}

/// A communication op of one stage, matched across ranks.
struct CommJob {
    job: Job,
    /// (rank, index of the op in the rank's comm list, label) for every participant.
    parts: Vec<(usize, usize, String)>,
}

fn collective_kind(
    r: &mercury_plan::RankProgram,
    group: &[usize],
    c: &Collective,
) -> Result<(CollectiveKind, &'static str), String> {
    let group_len = group.len();
    Ok(match c {
        Collective::AllGather { src, .. } => (
            CollectiveKind::AllGather {
                bytes: view_bytes(r, src)?,
            },
            "all_gather",
        ),
        Collective::ReduceScatter { src, .. } => (
            CollectiveKind::ReduceScatter {
                bytes: view_bytes(r, src)?,
            },
            "reduce_scatter",
        ),
        Collective::AllReduce { bufs, .. } => {
            let mut bytes = 0.0;
            for b in bufs {
                bytes += view_bytes(r, b)?;
            }
            (CollectiveKind::AllReduce { bytes }, "all_reduce")
        }
        Collective::AllToAll { src, .. } => (
            CollectiveKind::AllToAll {
                bytes: view_bytes(r, src)?,
            },
            "all_to_all",
        ),
        Collective::Reduce { src, root, .. } => {
            let Some(root) = group.get(*root) else {
                return Err(format!("reduce root {root} outside a group of {group_len}"));
            };
            (
                CollectiveKind::Reduce {
                    bytes: view_bytes(r, src)?,
                    root: *root,
                },
                "reduce",
            )
        }
        Collective::Broadcast { buf, root } => {
            // The plan names the root by its position in the group; the cost model by its
            // device id (it sorts the group).
            let Some(root) = group.get(*root) else {
                return Err(format!(
                    "broadcast root {root} outside a group of {group_len}"
                ));
            };
            (
                CollectiveKind::Broadcast {
                    bytes: view_bytes(r, buf)?,
                    root: *root,
                },
                "broadcast",
            )
        }
    })
}

/// Matches the comm ops of stage `si` across ranks into jobs.
fn stage_jobs(plan: &Plan, topo: &Topology, si: usize) -> Result<Vec<CommJob>, SimError> {
    let err = |what: String| SimError::Comm { stage: si, what };
    let n = plan.ranks.len();
    let mut jobs: Vec<CommJob> = Vec::new();
    // Point to point: (from, to, tag) -> (send op index, bytes); receives looked up after.
    let mut sends: BTreeMap<(usize, usize, u64), (usize, f64)> = BTreeMap::new();
    let mut recvs: BTreeMap<(usize, usize, u64), usize> = BTreeMap::new();
    // Collectives: (group, occurrence) -> (kind, name, members seen).
    type CollKey = (Vec<usize>, usize);
    type CollVal = (CollectiveKind, &'static str, Vec<(usize, usize)>);
    let mut colls: BTreeMap<CollKey, CollVal> = BTreeMap::new();
    for r in &plan.ranks {
        let Some(st) = r.stages.get(si) else { continue };
        let mut seen: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
        for (oi, op) in st.comm.iter().enumerate() {
            match op {
                CommOp::Send { peer, src, tag } => {
                    if *peer >= n || *peer == r.rank {
                        return Err(err(format!("rank {} sends to invalid peer {peer}", r.rank)));
                    }
                    let b = view_bytes(r, src).map_err(|w| err(format!("rank {}: {w}", r.rank)))?;
                    if sends.insert((r.rank, *peer, *tag), (oi, b)).is_some() {
                        return Err(err(format!(
                            "rank {} sends twice to {peer} tag {tag}",
                            r.rank
                        )));
                    }
                }
                CommOp::Recv { peer, tag, .. } => {
                    if *peer >= n || *peer == r.rank {
                        return Err(err(format!(
                            "rank {} receives from invalid peer {peer}",
                            r.rank
                        )));
                    }
                    if recvs.insert((*peer, r.rank, *tag), oi).is_some() {
                        return Err(err(format!(
                            "rank {} receives twice from {peer} tag {tag}",
                            r.rank
                        )));
                    }
                }
                CommOp::Collective { group, collective } => {
                    if group.iter().any(|g| *g >= n) || !group.contains(&r.rank) {
                        return Err(err(format!(
                            "rank {}: collective group {group:?} is invalid",
                            r.rank
                        )));
                    }
                    let occ = seen.entry(group.clone()).or_insert(0);
                    let key = (group.clone(), *occ);
                    *occ += 1;
                    let (kind, name) = collective_kind(r, group, collective)
                        .map_err(|w| err(format!("rank {}: {w}", r.rank)))?;
                    let e = colls.entry(key).or_insert((kind, name, Vec::new()));
                    if e.1 != name {
                        return Err(err(format!(
                            "group {group:?}: rank {} runs {name} where others run {}",
                            r.rank, e.1
                        )));
                    }
                    // Members may disagree on sizes only through bad plans; take the largest.
                    e.0 = max_kind(e.0, kind);
                    e.2.push((r.rank, oi));
                }
            }
        }
    }
    for ((from, to, tag), (soi, bytes)) in &sends {
        let Some(roi) = recvs.remove(&(*from, *to, *tag)) else {
            return Err(err(format!(
                "send {from} -> {to} tag {tag} has no matching receive"
            )));
        };
        let lat = topo
            .tier(*from, *to)
            .map(|l| topo.latency(l))
            .unwrap_or(0.0);
        jobs.push(CommJob {
            job: Job {
                phases: vec![vec![Flow {
                    src: *from,
                    dst: *to,
                    bytes: *bytes,
                    latency: lat + topo.launch_overhead(),
                    copy_engine: true,
                }]],
            },
            parts: vec![
                (*from, *soi, format!("send -> {to}")),
                (*to, roi, format!("recv <- {from}")),
            ],
        });
    }
    if let Some(((from, to, tag), _)) = recvs.into_iter().next() {
        return Err(err(format!(
            "receive {from} -> {to} tag {tag} has no matching send"
        )));
    }
    for ((group, _), (kind, name, members)) in colls {
        let mut have: Vec<usize> = members.iter().map(|m| m.0).collect();
        have.sort_unstable();
        let mut want = group.clone();
        want.sort_unstable();
        want.dedup();
        if have != want {
            return Err(err(format!(
                "{name} over {group:?} is issued by ranks {have:?} only"
            )));
        }
        jobs.push(CommJob {
            job: collective_job(topo, &group, kind),
            parts: members
                .into_iter()
                .map(|(r, oi)| (r, oi, format!("{name} {group:?}")))
                .collect(),
        });
    }
    Ok(jobs)
}

fn max_kind(a: CollectiveKind, b: CollectiveKind) -> CollectiveKind {
    use CollectiveKind::*;
    match (a, b) {
        (AllGather { bytes: x }, AllGather { bytes: y }) => AllGather { bytes: x.max(y) },
        (ReduceScatter { bytes: x }, ReduceScatter { bytes: y }) => {
            ReduceScatter { bytes: x.max(y) }
        }
        (AllReduce { bytes: x }, AllReduce { bytes: y }) => AllReduce { bytes: x.max(y) },
        (AllToAll { bytes: x }, AllToAll { bytes: y }) => AllToAll { bytes: x.max(y) },
        (Broadcast { bytes: x, root }, Broadcast { bytes: y, .. }) => Broadcast {
            bytes: x.max(y),
            root,
        },
        (Reduce { bytes: x, root }, Reduce { bytes: y, .. }) => Reduce {
            bytes: x.max(y),
            root,
        },
        (a, _) => a,
    }
}

/// Simulates `plan` on `topo`.
pub fn simulate(plan: &Plan, topo: &Topology, opts: SimOptions) -> Result<Simulation, SimError> {
    let n = plan.ranks.len();
    if n > topo.num_devices() {
        return Err(SimError::TooManyRanks {
            plan: plan.name.clone(),
            ranks: n,
            topology: topo.name.clone(),
            devices: topo.num_devices(),
        });
    }
    for (i, r) in plan.ranks.iter().enumerate() {
        if r.rank != i {
            return Err(SimError::Op {
                rank: i,
                what: format!("program at position {i} says rank {}", r.rank),
            });
        }
    }
    let stages = plan.ranks.iter().map(|r| r.stages.len()).max().unwrap_or(0);
    let mut t = 0.0;
    let mut sim = Simulation {
        latency: 0.0,
        stages: Vec::with_capacity(stages),
        compute_busy: vec![0.0; n],
        comm_busy: vec![0.0; n],
        tier_bytes: vec![0.0; topo.levels.len()],
        flops: 0.0,
        events: Vec::new(),
    };
    for si in 0..stages {
        // Compute streams.
        let mut compute_end = vec![t; n];
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else { continue };
            let mut c = t;
            for op in &st.compute {
                let cost = op_cost(r, op, topo)?;
                if opts.trace {
                    sim.events.push(TraceEvent {
                        name: cost.label.clone(),
                        cat: "compute".into(),
                        rank: r.rank,
                        lane: 0,
                        start: c,
                        dur: cost.seconds,
                        stage: si,
                        args: serde_json::json!({
                            "flops": cost.flops,
                            "bytes": cost.bytes,
                        }),
                    });
                }
                c += cost.seconds;
                sim.flops += cost.flops;
            }
            sim.compute_busy[r.rank] += c - t;
            compute_end[r.rank] = c;
        }
        // Transfers.
        let jobs = stage_jobs(plan, topo, si)?;
        let just: Vec<Job> = jobs.iter().map(|j| j.job.clone()).collect();
        let (done, bytes) = run_jobs(topo, &just, t);
        for (acc, b) in sim.tier_bytes.iter_mut().zip(&bytes) {
            *acc += b;
        }
        let mut comm_end = vec![t; n];
        for (cj, &d) in jobs.iter().zip(&done) {
            for (rank, oi, label) in &cj.parts {
                comm_end[*rank] = comm_end[*rank].max(d);
                if opts.trace {
                    let flow_bytes: f64 = cj.job.phases.iter().flatten().map(|f| f.bytes).sum();
                    sim.events.push(TraceEvent {
                        name: label.clone(),
                        cat: "comm".into(),
                        rank: *rank,
                        lane: 1 + oi,
                        start: t,
                        dur: d - t,
                        stage: si,
                        args: serde_json::json!({ "bytes_on_wire": flow_bytes }),
                    });
                }
            }
        }
        let mut end = t;
        let mut critical = 0;
        let mut max_compute: f64 = 0.0;
        let mut max_comm: f64 = 0.0;
        for rank in 0..n {
            sim.comm_busy[rank] += comm_end[rank] - t;
            max_compute = max_compute.max(compute_end[rank] - t);
            max_comm = max_comm.max(comm_end[rank] - t);
            let e = compute_end[rank].max(comm_end[rank]);
            if e > end {
                end = e;
                critical = rank;
            }
        }
        let end = end + stage_sync(plan, topo, si);
        sim.stages.push(StageTiming {
            start: t,
            end,
            compute: max_compute,
            comm: max_comm,
            critical_rank: critical,
        });
        t = end;
    }
    sim.latency = t;
    Ok(sim)
}

/// The synchronisation a stage costs after its work: the latency of the slowest tier its
/// transfers cross (a message's two ends, a collective's members), or nothing when no rank
/// moves data in it. This follows the executor's default ordering (`StageSync::Peers` in
/// `mercury_runtime::cuda::schedule`): a stream waits only for the streams that touched the
/// same ranks before it, so a stage of local compute continues on each rank's stream without a
/// cross-device wait, and an empty stage does nothing. (Charging the machine's slowest latency
/// after every stage, as before 2026-12-01, priced the two-stage all-gather GEMM at M = 1024 on
/// 2 H200s 27% slow; docs/perf.md, "The search's predictions".)
fn stage_sync(plan: &Plan, topo: &Topology, si: usize) -> f64 {
    let mut slowest: Option<usize> = None;
    let mut cross = |a: usize, b: usize| {
        if let Some(l) = topo.tier(a, b) {
            slowest = Some(slowest.map_or(l, |s| s.min(l)));
        }
    };
    for r in &plan.ranks {
        let Some(st) = r.stages.get(si) else { continue };
        for c in &st.comm {
            match c {
                CommOp::Send { peer, .. } | CommOp::Recv { peer, .. } => cross(r.rank, *peer),
                CommOp::Collective { group, .. } => {
                    for &m in group {
                        cross(r.rank, m);
                    }
                }
            }
        }
    }
    slowest.map_or(0.0, |l| topo.latency(l))
}

impl Simulation {
    /// Chrome / Perfetto trace (`traceEvents`, microseconds): pid = rank, tid 0 = compute,
    /// tid 1+i = comm op i of a stage; stage boundaries as instant events on rank 0.
    pub fn chrome_trace(&self, title: &str, ranks: usize) -> serde_json::Value {
        let mut ev: Vec<serde_json::Value> = Vec::new();
        let lanes = self.events.iter().map(|e| e.lane).max().unwrap_or(1).max(1);
        for r in 0..ranks {
            ev.push(serde_json::json!({
                "name": "process_name", "ph": "M", "pid": r, "tid": 0,
                "args": { "name": format!("rank {r}") }
            }));
            ev.push(serde_json::json!({
                "name": "process_sort_index", "ph": "M", "pid": r, "tid": 0,
                "args": { "sort_index": r }
            }));
            for lane in 0..=lanes {
                let name = if lane == 0 {
                    "compute".to_string()
                } else {
                    format!("comm {}", lane - 1)
                };
                ev.push(serde_json::json!({
                    "name": "thread_name", "ph": "M", "pid": r, "tid": lane,
                    "args": { "name": name }
                }));
            }
        }
        for e in &self.events {
            let mut args = e.args.clone();
            if let Some(o) = args.as_object_mut() {
                o.insert("stage".into(), serde_json::json!(e.stage));
            }
            ev.push(serde_json::json!({
                "name": e.name, "cat": e.cat, "ph": "X",
                "ts": e.start * 1e6, "dur": e.dur * 1e6,
                "pid": e.rank, "tid": e.lane, "args": args,
            }));
        }
        for (i, s) in self.stages.iter().enumerate() {
            ev.push(serde_json::json!({
                "name": format!("stage {i} end"), "ph": "i", "s": "g",
                "ts": s.end * 1e6, "pid": 0, "tid": 0,
            }));
        }
        serde_json::json!({
            "traceEvents": ev,
            "displayTimeUnit": "ms",
            "otherData": { "plan": title, "predicted_latency_s": self.latency },
        })
    }

    /// Fraction of the latency during which transfers are not hidden behind compute on the
    /// critical ranks (0 = fully overlapped or no communication).
    pub fn exposed_comm_fraction(&self) -> f64 {
        if self.latency <= 0.0 {
            return 0.0;
        }
        let exposed: f64 = self
            .stages
            .iter()
            .map(|s| (s.comm - s.compute).max(0.0))
            .sum();
        exposed / self.latency
    }
}

#[cfg(test)]
mod tests;
