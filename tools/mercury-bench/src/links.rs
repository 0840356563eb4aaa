//! Link measurements of one machine and the topology file they make (`mercury-mgpu links`).
//!
//! Per GPU: a device-to-device copy of `bytes` (256 MiB by default), counted as read + write
//! bytes (the `hbm_bandwidth_gbs` convention of docs/topology.md), and the time of one small
//! copy. Per ordered pair of GPUs: a copy-engine peer copy (`cuMemcpyPeerAsync`) of `bytes`,
//! counted one way (GB/s per direction, the `bandwidth_gbs` convention), with peer access
//! enabled where `cuDeviceCanAccessPeer` allows, and the time of one small peer copy. Medians
//! of CUDA-event-timed repetitions after a warm-up.
//!
//! [`topology_toml`] writes the measurements in the format of `passes/search/src/topology.rs`:
//! one `gpu` level whose bandwidth is the median over pairs (efficiency 1: the figure is
//! already what copies reach) and whose latency is the median small-copy time. On one GPU
//! there is no pair: the level has size 1 (its link is never used) and the file says so.
//! Inter-node levels cannot be measured from one process; add them by hand (docs/topology.md).
//! The patch rates are not measured here: they come from the caller (defaults: the H200
//! anchors of docs/toolchain-and-anchors.md), and the file says so.

use cudarc::driver::sys::{self, CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use mercury_runtime::cuda::error::{check, Result, RuntimeError};
use std::fmt::Write as _;
use std::sync::Arc;

/// One GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_bytes: usize,
    pub sm_count: usize,
    pub copy_engines: usize,
}

/// A copy measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRate {
    /// Source and destination GPU (equal: a local copy).
    pub src: usize,
    pub dst: usize,
    /// GB/s (1e9 bytes): read + write for a local copy, one way for a peer copy.
    pub gbs: f64,
    /// Median time of one small copy, microseconds.
    pub latency_us: f64,
    /// Peer access was enabled (false: the driver staged the copy through the host).
    pub peer_access: bool,
}

/// Everything [`measure`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkReport {
    pub devices: Vec<DeviceInfo>,
    pub local: Vec<CopyRate>,
    pub pairs: Vec<CopyRate>,
    pub bytes: usize,
    pub reps: usize,
    /// CUDA driver API version, e.g. "13.0".
    pub cuda: String,
    /// Kernel module version from /proc/driver/nvidia/version, when readable.
    pub driver: Option<String>,
    /// NCCL version, when the library loads.
    pub nccl: Option<String>,
}

/// Rates the topology needs but this tool does not measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub gemm_tflops: f64,
    pub attention_tflops: f64,
    pub attention_causal_tflops: f64,
    /// Where the numbers come from (written as a comment).
    pub origin: String,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            gemm_tflops: 803.0,
            attention_tflops: 612.0,
            attention_causal_tflops: 580.0,
            origin: "H200 anchors of docs/toolchain-and-anchors.md (cuBLAS 8192^3 bf16; cuDNN attention B1 H32 S32K D128), NOT measured by this tool".into(),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ev(ctx: &Arc<CudaContext>) -> Result<cudarc::driver::CudaEvent> {
    ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(RuntimeError::driver("create event"))
}

fn buffer(stream: &Arc<CudaStream>, bytes: usize) -> Result<(CudaSlice<u8>, u64)> {
    // SAFETY: the contents are only copied around, never interpreted.
    let b = unsafe { stream.alloc::<u8>(bytes.max(256)) }.map_err(RuntimeError::driver("alloc"))?;
    let p = {
        let (p, _g) = b.device_ptr(stream);
        p
    };
    Ok((b, p))
}

/// Times `reps` enqueues of `op` on `stream` (each between two events), after one warm-up;
/// returns the median milliseconds.
fn time(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    reps: usize,
    op: &dyn Fn() -> Result<()>,
) -> Result<f64> {
    op()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (a, b) = (ev(ctx)?, ev(ctx)?);
        a.record(stream).map_err(RuntimeError::driver("record"))?;
        op()?;
        b.record(stream).map_err(RuntimeError::driver("record"))?;
        t.push(a.elapsed_ms(&b).map_err(RuntimeError::driver("elapsed"))? as f64);
    }
    Ok(median(t))
}

/// Times `n` back-to-back enqueues of `op`; returns microseconds per enqueue.
fn time_small(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    n: usize,
    op: &dyn Fn() -> Result<()>,
) -> Result<f64> {
    op()?;
    let mut t = Vec::new();
    for _ in 0..5 {
        let (a, b) = (ev(ctx)?, ev(ctx)?);
        a.record(stream).map_err(RuntimeError::driver("record"))?;
        for _ in 0..n {
            op()?;
        }
        b.record(stream).map_err(RuntimeError::driver("record"))?;
        t.push(a.elapsed_ms(&b).map_err(RuntimeError::driver("elapsed"))? as f64 * 1e3 / n as f64);
    }
    Ok(median(t))
}

fn info(ctx: &Arc<CudaContext>) -> Result<DeviceInfo> {
    let attr = |a| {
        ctx.attribute(a)
            .map_err(RuntimeError::driver("device attribute"))
            .map(|v| v.max(0) as usize)
    };
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(RuntimeError::driver("device name"))?,
        total_bytes: ctx.total_mem().map_err(RuntimeError::driver("total mem"))?,
        sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        copy_engines: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
    })
}

/// Measures every visible GPU (or the first `max_devices`) and every ordered pair.
pub fn measure(bytes: usize, reps: usize, max_devices: Option<usize>) -> Result<LinkReport> {
    mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver)?;
    let visible = CudaContext::device_count()
        .map_err(RuntimeError::driver("device count"))?
        .max(0) as usize;
    let n = max_devices.map_or(visible, |m| m.min(visible));
    if n == 0 {
        return Err(RuntimeError::Unsupported("no GPU visible".into()));
    }
    let ctxs: Vec<Arc<CudaContext>> = (0..n)
        .map(mercury_kernels::cuda::open_context)
        .collect::<std::result::Result<_, _>>()?;
    let streams: Vec<Arc<CudaStream>> = ctxs
        .iter()
        .map(|c| {
            c.new_stream()
                .map_err(RuntimeError::driver("create stream"))
        })
        .collect::<Result<_>>()?;
    let devices = ctxs.iter().map(info).collect::<Result<Vec<_>>>()?;
    let reps = reps.max(1);

    let mut local = Vec::new();
    for (c, s) in ctxs.iter().zip(&streams) {
        c.bind_to_thread().map_err(RuntimeError::driver("bind"))?;
        let (_a, pa) = buffer(s, bytes)?;
        let (_b, pb) = buffer(s, bytes)?;
        // SAFETY: both buffers hold `bytes` on this device; the stream is this device's.
        let big = || {
            check(
                unsafe { sys::cuMemcpyDtoDAsync_v2(pb, pa, bytes, s.cu_stream()) },
                "cuMemcpyDtoDAsync",
            )
        };
        // SAFETY: as above, 8 bytes.
        let small = || {
            check(
                unsafe { sys::cuMemcpyDtoDAsync_v2(pb, pa, 8, s.cu_stream()) },
                "cuMemcpyDtoDAsync",
            )
        };
        let ms = time(c, s, reps, &big)?;
        let lat = time_small(c, s, 200, &small)?;
        s.synchronize()
            .map_err(RuntimeError::driver("synchronize"))?;
        local.push(CopyRate {
            src: c.ordinal(),
            dst: c.ordinal(),
            gbs: 2.0 * bytes as f64 / (ms * 1e-3) / 1e9,
            latency_us: lat,
            peer_access: true,
        });
    }

    let mut pairs = Vec::new();
    for (i, ca) in ctxs.iter().enumerate() {
        for (j, cb) in ctxs.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: valid out-pointer; both devices exist.
            check(
                unsafe { sys::cuDeviceCanAccessPeer(&mut can, ca.cu_device(), cb.cu_device()) },
                "cuDeviceCanAccessPeer",
            )?;
            if can != 0 {
                ca.bind_to_thread().map_err(RuntimeError::driver("bind"))?;
                // SAFETY: `ca` is current, `cb`'s context is live.
                let r = unsafe { sys::cuCtxEnablePeerAccess(cb.cu_ctx(), 0) };
                if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                    check(r, "cuCtxEnablePeerAccess")?;
                }
            }
            ca.bind_to_thread().map_err(RuntimeError::driver("bind"))?;
            let (_a, pa) = buffer(&streams[i], bytes)?;
            cb.bind_to_thread().map_err(RuntimeError::driver("bind"))?;
            let (_b, pb) = buffer(&streams[j], bytes)?;
            streams[j]
                .synchronize()
                .map_err(RuntimeError::driver("synchronize"))?;
            ca.bind_to_thread().map_err(RuntimeError::driver("bind"))?;
            let s = &streams[i];
            // SAFETY: `pa` holds `bytes` on device i, `pb` on device j; both contexts live.
            let big = || {
                check(
                    unsafe {
                        sys::cuMemcpyPeerAsync(
                            pb,
                            cb.cu_ctx(),
                            pa,
                            ca.cu_ctx(),
                            bytes,
                            s.cu_stream(),
                        )
                    },
                    "cuMemcpyPeerAsync",
                )
            };
            // SAFETY: as above, 8 bytes.
            let small = || {
                check(
                    unsafe {
                        sys::cuMemcpyPeerAsync(pb, cb.cu_ctx(), pa, ca.cu_ctx(), 8, s.cu_stream())
                    },
                    "cuMemcpyPeerAsync",
                )
            };
            let ms = time(ca, s, reps, &big)?;
            let lat = time_small(ca, s, 200, &small)?;
            s.synchronize()
                .map_err(RuntimeError::driver("synchronize"))?;
            pairs.push(CopyRate {
                src: ca.ordinal(),
                dst: cb.ordinal(),
                gbs: bytes as f64 / (ms * 1e-3) / 1e9,
                latency_us: lat,
                peer_access: can != 0,
            });
        }
    }
    let mut v = 0i32;
    // SAFETY: valid out-pointer.
    check(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    let driver = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| parse_driver_version(&t));
    let nccl = mercury_runtime::cuda::nccl::version()
        .ok()
        .map(|(a, b, c)| format!("{a}.{b}.{c}"));
    Ok(LinkReport {
        devices,
        local,
        pairs,
        bytes,
        reps,
        cuda: format!("{}.{}", v / 1000, (v % 1000) / 10),
        driver,
        nccl,
    })
}

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

fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The topology file of `report` (see the module docs); `name` is the topology's name.
pub fn topology_toml(report: &LinkReport, name: &str, rates: &Rates) -> String {
    let n = report.devices.len();
    let d0 = &report.devices[0];
    let hbm = median(report.local.iter().map(|r| r.gbs).collect());
    let local_lat = median(report.local.iter().map(|r| r.latency_us).collect());
    let mut o = String::new();
    let mib = report.bytes as f64 / (1 << 20) as f64;
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
        "# Copies of {mib:.0} MiB, median of {} CUDA-event-timed runs after a warm-up; small-copy",
        report.reps
    );
    let _ = writeln!(
        o,
        "# latency = median time of one 8-byte copy in a burst of 200."
    );
    for r in &report.local {
        let _ = writeln!(
            o,
            "#   GPU {}: device-to-device {:.0} GB/s (read + write), {:.2} us",
            r.src, r.gbs, r.latency_us
        );
    }
    for r in &report.pairs {
        let _ = writeln!(
            o,
            "#   GPU {} -> GPU {}: peer copy {:.1} GB/s one way, {:.2} us{}",
            r.src,
            r.dst,
            r.gbs,
            r.latency_us,
            if r.peer_access {
                ""
            } else {
                " (NO peer access: staged through host by the driver)"
            }
        );
    }
    let _ = writeln!(o, "name = {}", toml_str(name));
    let desc = if n > 1 {
        format!(
            "{n} x {} on one node, links measured by peer copies",
            d0.name
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
        "# Measured: median device-to-device copy over the GPUs (read + write bytes)."
    );
    let _ = writeln!(o, "hbm_bandwidth_gbs = {:.1}", hbm);
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
    let _ = writeln!(o, "gemm_tflops = {:.1}", rates.gemm_tflops);
    let _ = writeln!(o, "attention_tflops = {:.1}", rates.attention_tflops);
    let _ = writeln!(
        o,
        "attention_causal_tflops = {:.1}",
        rates.attention_causal_tflops
    );
    let _ = writeln!(o);
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
    if report.pairs.is_empty() {
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
        let _ = writeln!(o, "latency_us = {:.2}", local_lat);
    } else {
        let bws: Vec<f64> = report.pairs.iter().map(|r| r.gbs).collect();
        let (lo, hi) = (
            bws.iter().copied().fold(f64::INFINITY, f64::min),
            bws.iter().copied().fold(0.0, f64::max),
        );
        let bw = median(bws);
        let lat = median(report.pairs.iter().map(|r| r.latency_us).collect());
        let staged = report.pairs.iter().filter(|r| !r.peer_access).count();
        let _ = writeln!(
            o,
            "link = {}",
            toml_str(&format!(
                "peer copies (cuMemcpyPeerAsync): min {lo:.1} / median {bw:.1} / max {hi:.1} GB/s one way{}",
                if staged > 0 {
                    format!(", {staged} pair(s) without peer access")
                } else {
                    String::new()
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
            "# Measured: the median pair, already what copies reach (efficiency 1)."
        );
        let _ = writeln!(o, "bandwidth_gbs = {:.1}", bw);
        let _ = writeln!(o, "efficiency = 1.0");
        let _ = writeln!(o, "latency_us = {:.2}", lat);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(n: usize) -> LinkReport {
        let devices = (0..n)
            .map(|i| DeviceInfo {
                ordinal: i,
                name: "NVIDIA H200".into(),
                total_bytes: 150_754_820_096,
                sm_count: 132,
                copy_engines: 3,
            })
            .collect();
        let local = (0..n)
            .map(|i| CopyRate {
                src: i,
                dst: i,
                gbs: 4161.0 + i as f64,
                latency_us: 2.1,
                peer_access: true,
            })
            .collect();
        let mut pairs = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    pairs.push(CopyRate {
                        src: a,
                        dst: b,
                        gbs: 380.0 + (a + b) as f64,
                        latency_us: 3.5,
                        peer_access: true,
                    });
                }
            }
        }
        LinkReport {
            devices,
            local,
            pairs,
            bytes: 256 << 20,
            reps: 10,
            cuda: "13.0".into(),
            driver: Some("580.159.04".into()),
            nccl: Some("2.28.3".into()),
        }
    }

    /// The written files load and validate with the search's own topology parser.
    #[test]
    fn written_topologies_validate() {
        for n in [1, 2, 8] {
            let text = topology_toml(&report(n), &format!("measured-{n}"), &Rates::default());
            let t = mercury_search::topology::Topology::from_toml_str(&text, "measured")
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(t.levels.len(), 1);
            assert_eq!(t.levels[0].size, n);
            assert_eq!(t.device.copy_engines, 3);
            assert_eq!(t.environment.nccl.as_deref(), Some("2.28.3"));
            if n > 1 {
                assert!((t.levels[0].bandwidth_gbs - 380.0 - n as f64).abs() < n as f64 + 1.0);
                assert!(text.contains("GPU 0 -> GPU 1"));
            } else {
                assert!(text.contains("only the local copy"));
            }
        }
        // Uneven pairs are flagged.
        let mut r = report(2);
        r.pairs[0].gbs = 20.0;
        r.pairs[0].peer_access = false;
        let text = topology_toml(&r, "uneven", &Rates::default());
        assert!(text.contains("WARNING") && text.contains("without peer access"));
        assert!(mercury_search::topology::Topology::from_toml_str(&text, "u").is_ok());
    }

    #[test]
    fn driver_version_line() {
        let t = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version: gcc 12";
        assert_eq!(parse_driver_version(t).as_deref(), Some("580.159.04"));
        assert_eq!(parse_driver_version(""), None);
    }

    /// On a machine with a GPU, a small measurement makes a valid file; skips otherwise.
    #[test]
    fn gpu_measure_or_skip() {
        if let Err(e) = mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver) {
            eprintln!("skipping GPU test: {e}");
            return;
        }
        let r = match measure(8 << 20, 3, Some(2)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipping GPU test: {e}");
                return;
            }
        };
        assert!(r.local.iter().all(|x| x.gbs > 0.0));
        let text = topology_toml(&r, "probe", &Rates::default());
        mercury_search::topology::Topology::from_toml_str(&text, "probe")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
