//! Fluid (flow-level) network simulation with max-min fair bandwidth sharing.
//!
//! A *job* is one communication operation (a matched Send/Recv pair, or one collective across
//! its group) lowered to a sequence of *phases*; the flows of a phase run concurrently and the
//! next phase starts when all of them are done. A flow waits its latency, then drains its bytes
//! through two ports (the sender's egress and the receiver's ingress at the tier joining them);
//! all flows active at an instant share every port max-min fairly. Point-to-point flows also
//! need one of the sender's copy engines; when all are busy they queue in job order.
//! Events are flow arrivals and completions only, so the cost is independent of byte counts.

use crate::topology::{Port, Topology};
use std::collections::HashMap;

/// One transfer of a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub src: usize,
    pub dst: usize,
    pub bytes: f64,
    /// Seconds before the first byte moves (link latency, launch cost, collapsed ring steps).
    pub latency: f64,
    /// Point-to-point copies occupy one of the sender's copy engines.
    pub copy_engine: bool,
}

/// One communication operation: phases run in sequence.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Job {
    pub phases: Vec<Vec<Flow>>,
}

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

/// Bytes moved over each level of the topology, summed over the run.
pub type TierBytes = Vec<f64>;

/// Runs the jobs from time `start`; returns each job's completion time and the bytes moved
/// per topology level.
pub fn run_jobs(topo: &Topology, jobs: &[Job], start: f64) -> (Vec<f64>, TierBytes) {
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
        if guard > 10_000_000 {
            break; // Defensive: cannot happen with finite flows, never loop forever.
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
    (done_at, tier_bytes)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::preset("h100-2x4").unwrap().unwrap()
    }

    fn flow(src: usize, dst: usize, bytes: f64) -> Flow {
        Flow {
            src,
            dst,
            bytes,
            latency: 0.0,
            copy_engine: false,
        }
    }

    fn job(flows: Vec<Flow>) -> Job {
        Job {
            phases: vec![flows],
        }
    }

    #[test]
    fn single_flow_is_latency_plus_bytes_over_bandwidth() {
        let t = topo();
        let mut f = flow(0, 1, 1e9);
        f.latency = 1e-5;
        let (done, bytes) = run_jobs(&t, &[job(vec![f])], 2.0);
        let want = 2.0 + 1e-5 + 1e9 / t.bandwidth(1);
        assert!((done[0] - want).abs() < 1e-12, "{} vs {want}", done[0]);
        assert_eq!(bytes[1], 1e9);
        assert_eq!(bytes[0], 0.0);
    }

    #[test]
    fn nic_is_shared_by_the_gpus_of_a_node() {
        let t = topo();
        // Four GPUs of node 0 send to node 1 at once: one NIC, four-way share.
        let jobs: Vec<Job> = (0..4).map(|g| job(vec![flow(g, 4 + g, 1e8)])).collect();
        let (done, _) = run_jobs(&t, &jobs, 0.0);
        let want = 4.0 * 1e8 / t.bandwidth(0);
        for d in &done {
            assert!((d - want).abs() / want < 1e-9, "{d} vs {want}");
        }
        // The opposite direction is independent: 0->4 and 4->0 do not slow each other.
        let (done, _) = run_jobs(
            &t,
            &[job(vec![flow(0, 4, 1e8)]), job(vec![flow(4, 0, 1e8)])],
            0.0,
        );
        let want = 1e8 / t.bandwidth(0);
        assert!((done[0] - want).abs() / want < 1e-9);
        assert!((done[1] - want).abs() / want < 1e-9);
    }

    #[test]
    fn max_min_gives_leftover_to_unconstrained_flows() {
        let t = topo();
        // 0->1 and 0->2 share GPU 0's NVLink egress; 3->2 shares GPU 2's ingress with 0->2.
        let jobs = vec![
            job(vec![flow(0, 1, 1e9)]),
            job(vec![flow(0, 2, 1e9)]),
            job(vec![flow(3, 2, 1e9)]),
        ];
        let (done, _) = run_jobs(&t, &jobs, 0.0);
        let bw = t.bandwidth(1);
        // All three get bw/2 until the first two finish together at 2e9/bw... 0->1 and 0->2 at
        // bw/2 each, 3->2 at bw/2: all finish at 2e9/bw.
        for d in &done {
            assert!((d - 2e9 / bw).abs() / (2e9 / bw) < 1e-9, "{d}");
        }
        // A short flow finishing frees bandwidth for the long one.
        let jobs = vec![job(vec![flow(0, 1, 1e9)]), job(vec![flow(0, 2, 3e9)])];
        let (done, _) = run_jobs(&t, &jobs, 0.0);
        assert!((done[0] - 2e9 / bw).abs() / done[0] < 1e-9);
        assert!((done[1] - 4e9 / bw).abs() / done[1] < 1e-9);
    }

    #[test]
    fn phases_run_in_sequence_and_copy_engines_queue() {
        let t = topo();
        let bw = t.bandwidth(1);
        let j = Job {
            phases: vec![vec![flow(0, 1, 1e9)], vec![], vec![flow(1, 2, 1e9)]],
        };
        let (done, _) = run_jobs(&t, &[j], 0.0);
        assert!((done[0] - 2e9 / bw).abs() / done[0] < 1e-9);
        // Four copies from GPU 0 to four different peers... GPU 0 has 3 copy engines, so the
        // fourth waits; the egress is shared anyway, so the total is unchanged, but the last
        // one finishes alone.
        let jobs: Vec<Job> = (1..4)
            .chain(std::iter::once(4))
            .map(|d| {
                job(vec![Flow {
                    copy_engine: true,
                    ..flow(0, d.min(3), 1e9)
                }])
            })
            .collect();
        let (done, _) = run_jobs(&t, &jobs, 0.0);
        let first = done.iter().cloned().fold(f64::INFINITY, f64::min);
        let last = done.iter().cloned().fold(0.0, f64::max);
        assert!(first < last, "queued copy must finish later: {done:?}");
        assert!(
            (last - 4e9 / bw).abs() / last < 1e-9,
            "{last} vs {}",
            4e9 / bw
        );
    }

    #[test]
    fn empty_and_zero_byte_jobs() {
        let t = topo();
        let mut z = flow(0, 1, 0.0);
        z.latency = 3e-6;
        let (done, _) = run_jobs(&t, &[Job::default(), job(vec![z])], 1.0);
        assert_eq!(done[0], 1.0);
        assert!((done[1] - (1.0 + 3e-6)).abs() < 1e-15);
    }
}
