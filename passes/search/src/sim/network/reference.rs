//! The network simulation as it was before the event heap and the per-component rate updates
//! (2026-12-02), kept as the reference of a randomised test: the new [`super::run_jobs`] must
//! give every job the same completion time and every level the same bytes, within `1e-9`
//! relative (the two differ in the order of floating-point operations only).

use super::{run_jobs, Flow, Job, TierBytes};
use crate::topology::{Port, Topology};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Dir {
    Out,
    In,
}

struct FlowState {
    job: usize,
    src: usize,
    remaining: f64,
    latency: f64,
    copy_engine: bool,
    /// Start of the latency wait, once admitted.
    admitted_at: Option<f64>,
    done: bool,
    resources: [usize; 2],
    rate: f64,
}

/// The event loop as it was before 2026-12-02, verbatim but for its guard: at every event it
/// scans every live flow and refills every active one over all ports. `None` when it gives up
/// after 100,000 events (it had 10,000,000): a flow whose last bytes take less than the
/// rounding of the clock (4 bytes at 11 TB/s at t = 1.5 s) is drained by `rate * dt` with `dt`
/// rounded to the clock's resolution and can be left just above the completion threshold,
/// with `next == t` from then on; the new loop completes a flow at its own event instead.
fn reference_run_jobs(topo: &Topology, jobs: &[Job], start: f64) -> Option<(Vec<f64>, TierBytes)> {
    let mut tier_bytes = vec![0.0; topo.levels.len()];
    let mut done_at = vec![start; jobs.len()];
    let mut phase = vec![0usize; jobs.len()];
    let mut resources: HashMap<(Port, Dir), usize> = HashMap::new();
    let mut capacity: Vec<f64> = Vec::new();
    let mut flows: Vec<FlowState> = Vec::new();
    // Index of the flows of each job's current phase.
    let mut current: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    let mut engines_busy: HashMap<usize, usize> = HashMap::new();
    let engines = topo.device.copy_engines.max(1);

    let mut resource = |port: Port, dir: Dir, capacity: &mut Vec<f64>| -> usize {
        *resources.entry((port, dir)).or_insert_with(|| {
            capacity.push(topo.bandwidth(port.level));
            capacity.len() - 1
        })
    };

    // Flows not yet done, in index order (the order they were started in): the event loop
    // scans these, not every flow ever started, so a long plan costs linear, not quadratic time.
    let mut live: Vec<usize> = Vec::new();
    // Starts phase `phase[j]` of job `j` at time `t`; returns false when the job has finished.
    let mut start_phase = |j: usize,
                           t: f64,
                           flows: &mut Vec<FlowState>,
                           live: &mut Vec<usize>,
                           current: &mut Vec<Vec<usize>>,
                           capacity: &mut Vec<f64>,
                           tier_bytes: &mut TierBytes,
                           phase: &mut Vec<usize>|
     -> bool {
        loop {
            let Some(ph) = jobs[j].phases.get(phase[j]) else {
                return false;
            };
            if ph.is_empty() {
                phase[j] += 1;
                continue;
            }
            current[j].clear();
            for f in ph {
                // Same-device flows never happen in lowered collectives; treat them as free.
                let level = topo.tier(f.src, f.dst).unwrap_or(topo.levels.len() - 1);
                tier_bytes[level] += f.bytes;
                let r0 = resource(topo.port(level, f.src), Dir::Out, capacity);
                let r1 = resource(topo.port(level, f.dst), Dir::In, capacity);
                current[j].push(flows.len());
                live.push(flows.len());
                flows.push(FlowState {
                    job: j,
                    src: f.src,
                    remaining: if f.src == f.dst {
                        0.0
                    } else {
                        f.bytes.max(0.0)
                    },
                    latency: f.latency.max(0.0),
                    copy_engine: f.copy_engine,
                    admitted_at: if f.copy_engine { None } else { Some(t) },
                    done: false,
                    resources: [r0, r1],
                    rate: 0.0,
                });
            }
            return true;
        }
    };

    let mut running = 0usize;
    for j in 0..jobs.len() {
        if start_phase(
            j,
            start,
            &mut flows,
            &mut live,
            &mut current,
            &mut capacity,
            &mut tier_bytes,
            &mut phase,
        ) {
            running += 1;
        }
    }
    let mut t = start;
    let mut guard = 0usize;
    while running > 0 {
        guard += 1;
        if guard > 100_000 {
            return None;
        }
        // Admit queued copy-engine flows (job order).
        for &i in &live {
            let f = &mut flows[i];
            if !f.done && f.copy_engine && f.admitted_at.is_none() {
                let busy = engines_busy.entry(f.src).or_insert(0);
                if *busy < engines {
                    *busy += 1;
                    f.admitted_at = Some(t);
                }
            }
        }
        // Active flows: admitted, latency elapsed, bytes left.
        let active: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| {
                let f = &flows[i];
                !f.done && f.remaining > 0.0 && f.admitted_at.is_some_and(|a| a + f.latency <= t)
            })
            .collect();
        max_min_rates(&mut flows, &active, &capacity);
        // Next event.
        let mut next = f64::INFINITY;
        for f in live.iter().map(|&i| &flows[i]) {
            if f.done {
                continue;
            }
            if let Some(a) = f.admitted_at {
                let ready = a + f.latency;
                if ready > t {
                    next = next.min(ready);
                } else if f.remaining <= 0.0 {
                    next = next.min(t);
                }
            }
        }
        for &i in &active {
            let f = &flows[i];
            if f.rate > 0.0 {
                next = next.min(t + f.remaining / f.rate);
            }
        }
        if !next.is_finite() {
            break; // Nothing can progress (only possible with zero capacity): give up.
        }
        let dt = next - t;
        for &i in &active {
            let f = &mut flows[i];
            f.remaining -= f.rate * dt;
            // Completion within rounding.
            if f.remaining <= 1e-9 * (1.0 + f.rate * dt) || f.remaining <= 1e-6 {
                f.remaining = 0.0;
            }
        }
        t = next;
        // Completed flows, and the jobs they belong to (only those can finish a phase now).
        let mut touched: Vec<usize> = Vec::new();
        for &i in &live {
            let f = &mut flows[i];
            if !f.done && f.remaining <= 0.0 && f.admitted_at.is_some_and(|a| a + f.latency <= t) {
                f.done = true;
                touched.push(f.job);
                if f.copy_engine {
                    if let Some(b) = engines_busy.get_mut(&f.src) {
                        *b = b.saturating_sub(1);
                    }
                }
            }
        }
        live.retain(|&i| !flows[i].done);
        touched.sort_unstable();
        touched.dedup();
        // Phases finished, in job order.
        for j in touched {
            if current[j].is_empty() {
                continue;
            }
            if current[j].iter().all(|&i| flows[i].done) {
                debug_assert!(current[j].iter().all(|&i| flows[i].job == j));
                phase[j] += 1;
                current[j].clear();
                if !start_phase(
                    j,
                    t,
                    &mut flows,
                    &mut live,
                    &mut current,
                    &mut capacity,
                    &mut tier_bytes,
                    &mut phase,
                ) {
                    done_at[j] = t;
                    running -= 1;
                }
            }
        }
    }
    Some((done_at, tier_bytes))
}

/// Progressive filling: every active flow's rate grows at the same pace until one of its
/// ports saturates; flows through saturated ports are frozen.
fn max_min_rates(flows: &mut [FlowState], active: &[usize], capacity: &[f64]) {
    for &i in active {
        flows[i].rate = 0.0;
    }
    let mut left: Vec<f64> = capacity.to_vec();
    let mut unfrozen: Vec<usize> = active.to_vec();
    while !unfrozen.is_empty() {
        let mut count = vec![0usize; capacity.len()];
        for &i in &unfrozen {
            for &r in &flows[i].resources {
                count[r] += 1;
            }
        }
        let mut inc = f64::INFINITY;
        for (r, &c) in count.iter().enumerate() {
            if c > 0 {
                inc = inc.min(left[r] / c as f64);
            }
        }
        if !inc.is_finite() {
            break;
        }
        let inc = inc.max(0.0);
        for &i in &unfrozen {
            flows[i].rate += inc;
        }
        for (r, &c) in count.iter().enumerate() {
            left[r] -= inc * c as f64;
        }
        let saturated: Vec<bool> = left
            .iter()
            .zip(capacity)
            .map(|(l, c)| *l <= 1e-9 * c)
            .collect();
        let before = unfrozen.len();
        unfrozen.retain(|&i| !flows[i].resources.iter().any(|&r| saturated[r]));
        if unfrozen.len() == before {
            break; // Numerical corner: nothing froze, rates are final.
        }
    }
}

/// A preset with its copy engines set and its two levels' bandwidths scaled (other ratios of
/// NIC to NVLink; never zero).
fn topology(preset: &str, engines: usize, scale: [f64; 2]) -> Topology {
    let mut t = Topology::preset(preset).unwrap().unwrap();
    t.device.copy_engines = engines;
    for (l, s) in t.levels.iter_mut().zip(scale) {
        l.bandwidth_gbs *= s;
    }
    t
}

const PRESETS: [&str; 6] = [
    "h100-2x4", "h100-1x8", "h100-4x2", "h100-2x2", "h100-4x1", "h100-2x8",
];

/// A flow between devices of a topology of `devices`: bytes and latencies from a few values
/// (so that flows tie, finish together and share ports evenly) or anything in a range.
fn flow(devices: usize) -> impl Strategy<Value = Flow> {
    let bytes = prop_oneof![Just(0.0), Just(4.0), Just(1e6), Just(64e6), (1.0..1e9f64),];
    let latency = prop_oneof![Just(0.0), Just(3e-6), Just(1.5e-5), (0.0..2e-5f64)];
    (0..devices, 0..devices, bytes, latency, any::<bool>()).prop_map(
        |(src, dst, bytes, latency, copy_engine)| Flow {
            src,
            dst,
            bytes,
            latency,
            copy_engine,
        },
    )
}

fn jobs(devices: usize) -> impl Strategy<Value = Vec<Job>> {
    let phase = prop::collection::vec(flow(devices), 0..5);
    let job = prop::collection::vec(phase, 0..4).prop_map(|phases| Job { phases });
    prop::collection::vec(job, 0..12)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // The cases where the reference gives up (about one in ten) are skipped.
        max_global_rejects: 4096,
        ..ProptestConfig::default()
    })]

    /// Random jobs on random topologies: the same completion times and bytes per level as
    /// the reference.
    #[test]
    fn run_jobs_matches_the_reference(
        (preset, engines, scale, start, jobs) in (0..PRESETS.len()).prop_flat_map(|p| {
            let devices = Topology::preset(PRESETS[p]).unwrap().unwrap().num_devices();
            (
                Just(PRESETS[p]),
                1..=3usize,
                [prop_oneof![Just(1.0), Just(0.25), Just(4.0)], prop_oneof![Just(1.0), Just(0.5), Just(30.0)]],
                prop_oneof![Just(0.0), Just(2e-3)],
                jobs(devices),
            )
        })
    ) {
        let topo = topology(preset, engines, scale);
        let reference = reference_run_jobs(&topo, &jobs, start);
        prop_assume!(reference.is_some(), "the reference loops at one instant");
        let (want, want_bytes) = reference.unwrap();
        let (got, got_bytes) = run_jobs(&topo, &jobs, start);
        prop_assert_eq!(got.len(), want.len());
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert!(close(*g, *w), "job {}: {} vs reference {} ({:?})", j, g, w, jobs[j]);
        }
        for (g, w) in got_bytes.iter().zip(&want_bytes) {
            prop_assert!(close(*g, *w), "bytes {} vs reference {}", g, w);
        }
    }
}

/// Sixteen senders, each with a copy to every other device queued on its three copy engines
/// (the shape of a ring's output delivery, where the old loop was slowest), of a few bytes and
/// of megabytes: the same completion times as the reference.
#[test]
fn queued_deliveries_match_the_reference() {
    let topo = Topology::preset("h100-2x8").unwrap().unwrap();
    for bytes in [4.0, 3e6] {
        let mut jobs = Vec::new();
        for src in 0..16 {
            for dst in (0..16).filter(|&d| d != src) {
                let lat = topo.latency(topo.tier(src, dst).unwrap()) + topo.launch_overhead();
                jobs.push(Job {
                    phases: vec![vec![Flow {
                        src,
                        dst,
                        bytes: bytes * (1 + (src + dst) % 3) as f64,
                        latency: lat,
                        copy_engine: true,
                    }]],
                });
            }
        }
        let (want, _) = reference_run_jobs(&topo, &jobs, 0.0).unwrap();
        let (got, _) = run_jobs(&topo, &jobs, 0.0);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(close(*g, *w), "job {j}: {g} vs reference {w}");
        }
    }
}
