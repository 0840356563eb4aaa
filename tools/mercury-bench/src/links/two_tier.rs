//! Two tiers on one host (`mercury-mgpu links --launcher env`): the processes of a launcher act
//! as "nodes", each driving `ranks_per_process` virtual ranks on one GPU; NCCL joins the
//! processes through one bridge rank each (`launcher` module docs of the runtime), forced onto
//! its socket transport by the caller's environment (`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
//! NCCL_SOCKET_IFNAME=lo`, and `NCCL_HOSTID` set per process where both share one GPU). This is
//! issue 13's two-tier machine.
//!
//! Measured, as [`super::measure`] does (medians of CUDA-event-timed runs, sizes ascending,
//! each sweep fitted as latency + bytes / bandwidth):
//! * the **slow tier**: a ping-pong between process 0 and process 1 over the bridge (process 0
//!   sends, process 1 sends back; one way = half the round trip), exactly the NCCL Send/Recv
//!   the transport issues between processes; and both directions at once (each process sends
//!   and receives in one group). The level's bandwidth is the per-direction rate of the latter:
//!   rings and all-to-alls load both directions at every step, and over the loopback socket
//!   the two directions share one host's copies (measured on one H200, 2026-12-01: the
//!   one-way figure made the model 2x optimistic on every schedule). Its latency is the
//!   ping-pong's;
//! * the **fast tier**: a device-to-device copy on process 0's GPU, what the transport does
//!   between virtual ranks of one process.
//!
//! [`topology_toml`] writes a two-level topology (`node` = processes, `gpu` = the virtual ranks
//! of a process). Virtual ranks share their GPU: the device's patch rates, HBM capacity and
//! bandwidth are divided by `ranks_per_gpu` (every rank's compute runs on the same SMs), which
//! is the model's only way to say so; the file states it.

use super::report::{fit_text, rate_toml, toml_str};
use super::{p2p, size_label, time_us, Dev, Method, Rates, Sample, Sweep};
use cudarc::driver::CudaContext;
use mercury_runtime::cuda::error::{Result, RuntimeError};
use mercury_runtime::cuda::launcher::{LaunchEnv, World};
use mercury_runtime::cuda::nccl::group_send_recv;
use std::fmt::Write as _;
use std::sync::Arc;

/// What process 0 measured (the other processes return `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct TwoTierReport {
    pub device: super::DeviceInfo,
    /// Processes ("nodes").
    pub processes: usize,
    /// Virtual ranks per process.
    pub ranks_per_process: usize,
    /// Ranks sharing each GPU (the divisor of the device's rates).
    pub ranks_per_gpu: usize,
    /// Process 0 <-> 1 over the bridge, one way (half the round trip).
    pub bridge: Sweep,
    /// Process 0 <-> 1 over the bridge, both directions at once (time of the exchange).
    pub bridge_both: Sweep,
    /// Device-to-device copy on process 0's GPU (bytes moved, one way).
    pub local: Sweep,
    pub reps: usize,
    pub nccl: Option<String>,
    pub cuda: String,
}

/// Runs the two-tier measurement in this process (every process of the launcher calls it with
/// the same arguments). `ordinal` is this process's GPU. `ranks_per_gpu` (the divisor of the
/// device's rates) defaults to the ranks of every process on the same host and GPU as this
/// one (host name and PCI address, gathered over the bridge): `ranks_per_process` with one
/// GPU per process, twice that when two processes share a GPU.
///
/// # Errors
/// Fewer than 2 processes, NCCL or CUDA failures.
pub fn measure(
    env: &LaunchEnv,
    ordinal: usize,
    ranks_per_process: usize,
    ranks_per_gpu: Option<usize>,
    sizes: &[usize],
    reps: usize,
) -> Result<Option<TwoTierReport>> {
    if env.world_size < 2 {
        return Err(RuntimeError::Unsupported(
            "two tiers need at least 2 processes (WORLD_SIZE >= 2)".into(),
        ));
    }
    let k = ranks_per_process.max(2);
    let ctx: Arc<CudaContext> = mercury_kernels::cuda::open_context(ordinal)?;
    let world = World::init(env, env.world_size * k, &vec![ctx.clone(); k])?;
    let bridge = world.bridge().ok_or_else(|| {
        RuntimeError::Unsupported("the launcher world did not form a bridge".into())
    })?;
    let here = placement_key(&ctx)?;
    let sharing = world
        .all_gather_u64(std::slice::from_ref(&ctx), here)?
        .iter()
        .filter(|k| **k == here)
        .count();
    let ranks_per_gpu = ranks_per_gpu.unwrap_or(k * sharing.max(1));
    let max = sizes.iter().copied().max().unwrap_or(1 << 20);
    let d = Dev::new(ctx.clone(), max)?;
    let reps_for = |bytes: usize| super::reps_for(reps, bytes);
    let me = env.rank;
    // Process 0 pings 1; processes 2.. only joined the bridge.
    if me > 1 {
        return Ok(None);
    }
    let peer = 1 - me;
    let mut ping = Vec::new();
    let mut both = Vec::new();
    for &bytes in sizes {
        let send = [p2p(true, &d, d.a, bytes, bridge, peer)];
        let recv = [p2p(false, &d, d.b, bytes, bridge, peer)];
        let round = || -> Result<()> {
            // SAFETY: `a` and `b` hold at least `bytes` on this process's GPU (the bridge's).
            unsafe {
                if me == 0 {
                    group_send_recv(&send)?;
                    group_send_recv(&recv)
                } else {
                    group_send_recv(&recv)?;
                    group_send_recv(&send)
                }
            }
        };
        let exchange = [send[0], recv[0]];
        // SAFETY: as for `round`.
        let swap = || unsafe { group_send_recv(&exchange) };
        if me == 0 {
            let us = time_us(&d, reps_for(bytes), &|_| round())?;
            ping.push(Sample {
                bytes,
                us: us / 2.0,
            });
            let us = time_us(&d, reps_for(bytes), &|_| swap())?;
            both.push(Sample { bytes, us });
        } else {
            // As many rounds as process 0's time_us: one warm-up, then the timed ones.
            for op in [&round as &dyn Fn() -> Result<()>, &swap] {
                for _ in 0..1 + reps_for(bytes) {
                    op()?;
                    d.stream
                        .synchronize()
                        .map_err(RuntimeError::driver("synchronize"))?;
                }
            }
        }
    }
    if me == 1 {
        return Ok(None);
    }
    let local = super::local_copy_samples(&d, sizes, reps)?;
    let (cuda, nccl) = super::versions()?;
    Ok(Some(TwoTierReport {
        device: super::info(&ctx)?,
        processes: env.world_size,
        ranks_per_process: k,
        ranks_per_gpu: ranks_per_gpu.max(1),
        bridge: Sweep::new(Method::Nccl, 0, 1, ping),
        bridge_both: Sweep::new(Method::Nccl, 0, 1, both),
        local: Sweep::new(Method::LocalCopy, 0, 0, local),
        reps,
        nccl,
        cuda,
    }))
}

/// A key of this process's host and GPU: FNV-1a of the host name and the GPU's PCI address
/// (what NCCL_HOSTID cannot fake).
fn placement_key(ctx: &Arc<CudaContext>) -> Result<u64> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut pci = Vec::new();
    for a in [
        A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
        A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
        A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
    ] {
        pci.push(
            ctx.attribute(a)
                .map_err(RuntimeError::driver("device attribute"))?,
        );
    }
    Ok(mercury_runtime::cuda::launcher::fnv1a(
        format!("{}/{pci:?}", host.trim()).as_bytes(),
    ))
}

/// The two-level topology file of `r` (module docs); `rates` are one whole GPU's.
pub fn topology_toml(r: &TwoTierReport, name: &str, rates: &Rates) -> String {
    let share = r.ranks_per_gpu as f64;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Measured by `mercury-mgpu links --launcher env`: {} processes (\"nodes\") x {} virtual ranks,",
        r.processes, r.ranks_per_process
    );
    let _ = writeln!(
        o,
        "# {} ranks per {} (CUDA {}{}); median of {} CUDA-event-timed runs per size.",
        r.ranks_per_gpu,
        r.device.name,
        r.cuda,
        r.nccl
            .as_ref()
            .map(|v| format!(", NCCL {v}"))
            .unwrap_or_default(),
        r.reps
    );
    for s in [&r.bridge, &r.bridge_both, &r.local] {
        let times: Vec<String> = s
            .samples
            .iter()
            .map(|x| format!("{} {:.1} us", size_label(x.bytes), x.us))
            .collect();
        let what = if std::ptr::eq(s, &r.bridge_both) {
            "process 0 <-> 1 both directions at once (time of the exchange)".to_string()
        } else if s.method == Method::Nccl {
            "process 0 <-> 1 NCCL send/recv over the bridge (half the round trip)".to_string()
        } else {
            format!("GPU {} device copy between virtual ranks", r.device.ordinal)
        };
        let _ = writeln!(o, "#   {what}: {}; {}", fit_text(s), times.join(", "));
    }
    let _ = writeln!(o, "name = {}", toml_str(name));
    let _ = writeln!(
        o,
        "description = {}",
        toml_str(&format!(
            "{} processes x {} virtual ranks of {}: NCCL between processes, device copies inside (measured)",
            r.processes, r.ranks_per_process, r.device.name
        ))
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "[device]");
    let _ = writeln!(
        o,
        "# One rank's share of the GPU: {} ranks share it, so capacity, HBM bandwidth and the",
        r.ranks_per_gpu
    );
    let _ = writeln!(o, "# patch rates are divided by {}.", r.ranks_per_gpu);
    let _ = writeln!(o, "name = {}", toml_str(&r.device.name));
    let _ = writeln!(
        o,
        "hbm_gb = {:.1}",
        r.device.total_bytes as f64 / 1e9 / share
    );
    let _ = writeln!(o, "hbm_reserved_gb = {:.2}", 4.0 / share);
    let _ = writeln!(o, "hbm_bandwidth_gbs = {:.1}", r.local.bandwidth() / share);
    let _ = writeln!(o, "copy_engines = {}", r.device.copy_engines.max(1));
    let _ = writeln!(
        o,
        "sm_count = {}",
        (r.device.sm_count / r.ranks_per_gpu).max(1)
    );
    let _ = writeln!(o, "launch_overhead_us = 5.0");
    let _ = writeln!(o);
    let _ = writeln!(o, "[device.rates]");
    let _ = writeln!(
        o,
        "# {} (whole GPU), divided by {}",
        rates.origin, r.ranks_per_gpu
    );
    let _ = writeln!(o, "gemm_tflops = {}", rate_toml(rates.gemm_tflops / share));
    let _ = writeln!(
        o,
        "attention_tflops = {}",
        rate_toml(rates.attention_tflops / share)
    );
    let _ = writeln!(
        o,
        "attention_causal_tflops = {}",
        rate_toml(rates.attention_causal_tflops / share)
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "[environment]");
    let _ = writeln!(o, "cuda = {}", toml_str(&r.cuda));
    if let Some(v) = &r.nccl {
        let _ = writeln!(o, "nccl = {}", toml_str(v));
    }
    // (name, size, link, bandwidth GB/s per direction, latency us). The bridge: the rate with
    // both directions loaded (module docs), the ping-pong's latency. The local copy's
    // convention counts read + write bytes: one way is half of it.
    let levels = [
        (
            "node",
            r.processes,
            "NCCL send/recv between processes over the bridge (socket transport when forced), both directions loaded",
            r.bridge_both.bandwidth().min(r.bridge.bandwidth()),
            r.bridge.latency_us(),
        ),
        (
            "gpu",
            r.ranks_per_process,
            "device copy between virtual ranks of one GPU",
            r.local.bandwidth() * 0.5,
            r.local.latency_us(),
        ),
    ];
    for (lname, size, link, bw, lat) in levels {
        let _ = writeln!(o);
        let _ = writeln!(o, "[[levels]]");
        let _ = writeln!(o, "name = {}", toml_str(lname));
        let _ = writeln!(o, "size = {size}");
        let _ = writeln!(o, "link = {}", toml_str(link));
        let _ = writeln!(o, "bandwidth_gbs = {bw:.3}");
        let _ = writeln!(o, "efficiency = 1.0");
        let _ = writeln!(o, "latency_us = {:.2}", lat.max(0.01));
        if lname == "node" {
            let _ = writeln!(
                o,
                "# One bridge per process: every rank's traffic to other processes shares it."
            );
            let _ = writeln!(o, "ports = 1");
        }
    }
    o
}
