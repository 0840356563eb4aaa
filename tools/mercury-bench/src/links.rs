//! Link measurements of one machine and the topology file they make (`mercury-mgpu links`).
//!
//! What is measured is what the executor's transports do, over a range of sizes (default
//! 64 KiB to 1 GiB in steps of 4x):
//!
//! * per GPU, a device-to-device copy (`cuMemcpyDtoDAsync`), counted as read + write bytes
//!   (the `hbm_bandwidth_gbs` convention of docs/topology.md);
//! * per ordered pair of GPUs, with peer access enabled both ways for the contexts *and* the
//!   default memory pools (`executor::enable_peer_access`, exactly as the placed executor does:
//!   the buffers come from the same stream-ordered allocator as the executor's slots):
//!   a copy-engine peer copy (`cuMemcpyPeerAsync`) *pulled* by the receiver's stream (what the
//!   copy transport does), the same copy *pushed* by the sender's stream, and NCCL
//!   `ncclSend`/`ncclRecv` (one communicator over every GPU, as the NCCL transport's world
//!   communicator); all one way, in GB/s per direction (the `bandwidth_gbs` convention);
//! * per unordered pair, both directions at once (pulled copies, and NCCL), per direction.
//!
//! Each figure is the median of CUDA-event-timed repetitions after a warm-up. The stream is
//! first *gated* (`cuStreamWaitValue32` on a device word that a second stream releases after
//! everything is enqueued), so the events time the transfer on the device, not the host's
//! enqueue of the call. Each sweep is fitted as `time = latency + bytes / bandwidth` by least
//! squares on relative error ([`fit`]); the fit's largest relative error is reported.
//!
//! **Why an earlier version measured 38 GB/s where NCCL reaches 345 GB/s** (2 H200s, NV18):
//! its buffers came from the stream-ordered allocator (cudarc's `alloc` is `cuMemAllocAsync`
//! from the device's default pool) while it enabled only *context* peer access, and only one
//! way per pair. Context peer access does not cover pool allocations, so the driver staged
//! every copy through host memory. The executor itself always set pool access too
//! (`cuMemPoolSetAccess`), so its transfers were not affected; only the measurement was.
//!
//! [`topology_toml`] writes the figures in the format of `passes/search/src/topology.rs`: one
//! `gpu` level whose bandwidth and latency are the median over pairs of the fits of one method
//! ([`LinkSource`]: pulled copies by default, the copy transport being mercury-run's default;
//! NCCL on request), efficiency 1 (the figure is already what transfers reach); every sweep in
//! comments. On one GPU there is no pair: the level has size 1 (its link is never used) and the
//! file says so. Inter-node levels cannot be measured from one process; add them by hand
//! (docs/topology.md). The patch rates are not measured here: they come from the caller
//! (defaults: the H200 anchors of docs/toolchain-and-anchors.md), and the file says so.

use cudarc::driver::sys::{self, CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::sys as ns;
use mercury_runtime::cuda::error::{check, Result, RuntimeError};
use mercury_runtime::cuda::nccl::{group_send_recv, P2p};
use std::fmt::Write as _;
use std::sync::Arc;

mod report;
#[cfg(test)]
mod tests;
pub mod two_tier;

pub use report::{parse_driver_version, size_label, table, topology_toml, write_rate_points};

/// One GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_bytes: usize,
    pub sm_count: usize,
    pub copy_engines: usize,
}

/// The median time of one transfer of `bytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub bytes: usize,
    /// Microseconds.
    pub us: f64,
}

/// `time = latency_us + bytes / (gbs * 1e3)` microseconds (bytes / GB/s = ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub latency_us: f64,
    /// One-way GB/s (1e9 bytes per second).
    pub gbs: f64,
    /// Largest |fit - sample| / sample over the samples.
    pub max_err: f64,
}

impl Fit {
    /// Predicted microseconds for `bytes`.
    pub fn predict_us(&self, bytes: usize) -> f64 {
        self.latency_us + bytes as f64 / (self.gbs * 1e3)
    }
}

/// Fits `latency + bytes / bandwidth` to `samples` by weighted least squares with weights
/// `1 / time^2` (so each size counts by its relative error, and the small sizes pin the
/// latency). A negative latency is clamped to 0 (the line is refitted through the origin).
/// `None`: fewer than two distinct sizes, or a fit without a positive bandwidth.
pub fn fit(samples: &[Sample]) -> Option<Fit> {
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.us.is_finite() && s.us > 0.0)
        .map(|s| (s.bytes as f64, s.us))
        .collect();
    let distinct = {
        let mut x: Vec<u64> = pts.iter().map(|p| p.0 as u64).collect();
        x.sort_unstable();
        x.dedup();
        x.len()
    };
    if distinct < 2 {
        return None;
    }
    let (mut sw, mut sx, mut sxx, mut st, mut sxt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (x, t) in &pts {
        let w = 1.0 / (t * t);
        sw += w;
        sx += w * x;
        sxx += w * x * x;
        st += w * t;
        sxt += w * x * t;
    }
    let det = sw * sxx - sx * sx;
    let (mut a, mut b) = if det > 0.0 {
        let b = (sw * sxt - sx * st) / det;
        ((st - b * sx) / sw, b)
    } else {
        (0.0, sxt / sxx)
    };
    if a < 0.0 {
        a = 0.0;
        b = sxt / sxx;
    }
    if !(b.is_finite() && b > 0.0) {
        return None;
    }
    let max_err = pts
        .iter()
        .map(|(x, t)| ((a + b * x - t) / t).abs())
        .fold(0.0, f64::max);
    Some(Fit {
        latency_us: a,
        gbs: 1e-3 / b,
        max_err,
    })
}

/// Sizes from `min` to `max` bytes (both included when `max` is `min` times a power of 4), in
/// steps of 4x.
pub fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = min.max(1);
    while s <= max {
        v.push(s);
        match s.checked_mul(4) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// How bytes moved in a [`Sweep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `cuMemcpyDtoDAsync` within one GPU (rates count read + write bytes).
    LocalCopy,
    /// `cuMemcpyPeerAsync` on the receiver's stream (the copy transport).
    CopyPull,
    /// `cuMemcpyPeerAsync` on the sender's stream.
    CopyPush,
    /// `ncclSend` / `ncclRecv` (the NCCL transport).
    Nccl,
}

impl Method {
    /// Short description for tables and files.
    pub fn describe(self) -> &'static str {
        match self {
            Method::LocalCopy => "device-to-device copy (read + write GB/s)",
            Method::CopyPull => "peer copy pulled by the receiver (copy transport)",
            Method::CopyPush => "peer copy pushed by the sender",
            Method::Nccl => "NCCL send/recv (NCCL transport)",
        }
    }

    /// Bytes counted per transferred byte (2 for a local copy: read + write).
    fn factor(self) -> f64 {
        if self == Method::LocalCopy {
            2.0
        } else {
            1.0
        }
    }
}

/// One method between two GPUs (or within one) over the sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub method: Method,
    pub src: usize,
    pub dst: usize,
    pub samples: Vec<Sample>,
    pub fit: Option<Fit>,
}

impl Sweep {
    /// Builds the sweep and its fit.
    pub fn new(method: Method, src: usize, dst: usize, samples: Vec<Sample>) -> Sweep {
        let fit = fit(&samples);
        Sweep {
            method,
            src,
            dst,
            samples,
            fit,
        }
    }

    /// GB/s of a sample in the method's convention.
    pub fn rate(&self, s: &Sample) -> f64 {
        self.method.factor() * s.bytes as f64 / (s.us * 1e3)
    }

    /// The fitted bandwidth in the method's convention (read + write for a local copy), or the
    /// rate of the largest size when there is no fit.
    pub fn bandwidth(&self) -> f64 {
        match &self.fit {
            Some(f) => self.method.factor() * f.gbs,
            None => self.samples.last().map_or(f64::NAN, |s| self.rate(s)),
        }
    }

    /// The fitted latency, or the time of the smallest size when there is no fit.
    pub fn latency_us(&self) -> f64 {
        match &self.fit {
            Some(f) => f.latency_us,
            None => self.samples.first().map_or(f64::NAN, |s| s.us),
        }
    }

    fn label(&self) -> String {
        match self.method {
            Method::LocalCopy => format!("GPU {} local copy", self.src),
            Method::CopyPull => format!("GPU {} -> {} copy, pulled", self.src, self.dst),
            Method::CopyPush => format!("GPU {} -> {} copy, pushed", self.src, self.dst),
            Method::Nccl => format!("GPU {} -> {} NCCL send/recv", self.src, self.dst),
        }
    }
}

/// Both directions of a pair at once.
#[derive(Debug, Clone, PartialEq)]
pub struct BothWays {
    pub a: usize,
    pub b: usize,
    pub method: Method,
    pub bytes: usize,
    /// GB/s per direction.
    pub gbs: f64,
}

/// Everything [`measure`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkReport {
    pub devices: Vec<DeviceInfo>,
    /// One [`Method::LocalCopy`] sweep per GPU.
    pub local: Vec<Sweep>,
    /// Per ordered pair: pulled and pushed copies, and NCCL when available.
    pub pairs: Vec<Sweep>,
    pub both: Vec<BothWays>,
    /// Ordered pairs without peer access (copies between them are staged through the host).
    pub staged: Vec<(usize, usize)>,
    pub sizes: Vec<usize>,
    pub reps: usize,
    /// What the reader should know (no NCCL, no gating, staged pairs).
    pub notes: Vec<String>,
    /// CUDA driver API version, e.g. "13.0".
    pub cuda: String,
    /// Kernel module version from /proc/driver/nvidia/version, when readable.
    pub driver: Option<String>,
    /// NCCL version, when the library loads.
    pub nccl: Option<String>,
}

impl LinkReport {
    /// The pair sweeps of `method`.
    pub fn pair_sweeps(&self, method: Method) -> Vec<&Sweep> {
        self.pairs.iter().filter(|s| s.method == method).collect()
    }
}

/// The patches' rates written into the topology: given (anchors, flags), or measured by
/// `--measure-rates` (`Bench::measure_rates`), which also fills the tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub gemm_tflops: f64,
    pub attention_tflops: f64,
    pub attention_causal_tflops: f64,
    /// Where the numbers come from (written as a comment).
    pub origin: String,
    /// Measured GEMM rates by shape (`[[device.rates.gemm_points]]`); empty when not measured.
    pub gemm_points: Vec<mercury_search::topology::GemmPoint>,
    /// Measured attention rates by shape (`[[device.rates.attention_points]]`).
    pub attention_points: Vec<mercury_search::topology::AttentionPoint>,
}

impl Rates {
    /// Rates from measured tables: the single figures are the tables' points at the anchors
    /// (GEMM 8192^3; attention at s = 32768, no mask and causal), else their medians.
    pub fn measured(
        gemm: Vec<mercury_search::topology::GemmPoint>,
        attention: Vec<mercury_search::topology::AttentionPoint>,
        origin: String,
    ) -> Rates {
        let median = |mut v: Vec<f64>| -> Option<f64> {
            v.sort_by(f64::total_cmp);
            (!v.is_empty()).then(|| v[v.len() / 2])
        };
        let d = Rates::default();
        let gemm_tflops = gemm
            .iter()
            .find(|p| (p.m, p.n, p.k) == (8192, 8192, 8192))
            .map(|p| p.tflops)
            .or_else(|| median(gemm.iter().map(|p| p.tflops).collect()))
            .unwrap_or(d.gemm_tflops);
        let attn = |causal: bool, fallback: f64| {
            attention
                .iter()
                .find(|p| p.causal == causal && (p.heads, p.sq, p.sk) == (32, 32768, 32768))
                .map(|p| p.tflops)
                .or_else(|| {
                    median(
                        attention
                            .iter()
                            .filter(|p| p.causal == causal)
                            .map(|p| p.tflops)
                            .collect(),
                    )
                })
                .unwrap_or(fallback)
        };
        Rates {
            gemm_tflops,
            attention_tflops: attn(false, d.attention_tflops),
            attention_causal_tflops: attn(true, d.attention_causal_tflops),
            origin,
            gemm_points: gemm,
            attention_points: attention,
        }
    }
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            gemm_tflops: 803.0,
            attention_tflops: 612.0,
            attention_causal_tflops: 580.0,
            origin: "H200 anchors of docs/toolchain-and-anchors.md (cuBLAS 8192^3 bf16; cuDNN attention B1 H32 S32K D128), NOT measured by this tool".into(),
            gemm_points: Vec::new(),
            attention_points: Vec::new(),
        }
    }
}

/// Which measured method the topology file's link level describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkSource {
    /// Peer copies pulled by the receiver (`--transport peer`, mercury-run's default).
    #[default]
    Copy,
    /// NCCL send/recv (`--transport nccl`, `--launcher env`).
    Nccl,
}

impl LinkSource {
    fn method(self) -> Method {
        match self {
            LinkSource::Copy => Method::CopyPull,
            LinkSource::Nccl => Method::Nccl,
        }
    }
}

/// What [`measure`] does.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Transfer sizes in bytes, ascending.
    pub sizes: Vec<usize>,
    /// Timed repetitions per size (5x as many up to 1 MiB, where one run is noisier).
    pub reps: usize,
    /// Measure only the first GPUs.
    pub max_devices: Option<usize>,
    /// Also measure NCCL send/recv.
    pub nccl: bool,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            sizes: sizes(64 << 10, 1 << 30),
            reps: 10,
            max_devices: None,
            nccl: true,
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

fn drv(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> RuntimeError {
    RuntimeError::driver(what)
}

/// One GPU's measuring kit: its stream, a second stream that releases the gate, two buffers of
/// the largest size (from the default memory pool, as the executor's slots), the gate word and
/// an event other streams wait on.
struct Dev {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    aux: Arc<CudaStream>,
    _a: CudaSlice<u8>,
    a: u64,
    _b: CudaSlice<u8>,
    b: u64,
    gate: Option<(CudaSlice<u8>, u64)>,
    k: std::cell::Cell<u32>,
    done: CudaEvent,
}

fn buffer(stream: &Arc<CudaStream>, bytes: usize) -> Result<(CudaSlice<u8>, u64)> {
    // SAFETY: the contents are only copied around, never interpreted.
    let b = unsafe { stream.alloc::<u8>(bytes.max(256)) }.map_err(drv("alloc"))?;
    let p = {
        let (p, _g) = b.device_ptr(stream);
        p
    };
    Ok((b, p))
}

impl Dev {
    fn new(ctx: Arc<CudaContext>, bytes: usize) -> Result<Dev> {
        ctx.bind_to_thread().map_err(drv("bind"))?;
        let stream = ctx.new_stream().map_err(drv("create stream"))?;
        let aux = ctx.new_stream().map_err(drv("create stream"))?;
        let (_a, a) = buffer(&stream, bytes)?;
        let (_b, b) = buffer(&stream, bytes)?;
        let (g, gp) = buffer(&stream, 256)?;
        // SAFETY: `gp` holds 256 bytes on this device; `a` and `b` hold `bytes`.
        unsafe {
            check(
                sys::cuMemsetD8Async(gp, 0, 256, stream.cu_stream()),
                "cuMemsetD8Async",
            )?;
            check(
                sys::cuMemsetD8Async(a, 1, bytes, stream.cu_stream()),
                "cuMemsetD8Async",
            )?;
        }
        stream.synchronize().map_err(drv("synchronize"))?;
        let done = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(drv("create event"))?;
        let mut d = Dev {
            ctx,
            stream,
            aux,
            _a,
            a,
            _b,
            b,
            gate: Some((g, gp)),
            k: std::cell::Cell::new(0),
            done,
        };
        // Stream memory operations may be unavailable: then the gate is off. (A gate that
        // holds must open, or the stream would wait forever.)
        match d.hold() {
            Ok(()) => d.release()?,
            Err(_) => d.gate = None,
        }
        d.stream.synchronize().map_err(drv("synchronize"))?;
        Ok(d)
    }

    /// The stream waits until the gate word reaches the next count.
    fn hold(&self) -> Result<()> {
        if let Some((_, w)) = &self.gate {
            self.k.set(self.k.get() + 1);
            self.ctx.bind_to_thread().map_err(drv("bind"))?;
            // SAFETY: `w` is a live device word of this device; the stream waits until it is
            // >= k, which `release` writes.
            check(
                unsafe {
                    sys::cuStreamWaitValue32_v2(
                        self.stream.cu_stream(),
                        *w,
                        self.k.get(),
                        sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                    )
                },
                "cuStreamWaitValue32",
            )?;
        }
        Ok(())
    }

    /// Opens the gate (on the second stream).
    fn release(&self) -> Result<()> {
        if let Some((_, w)) = &self.gate {
            self.ctx.bind_to_thread().map_err(drv("bind"))?;
            // SAFETY: `w` is a live device word of this device.
            check(
                unsafe { sys::cuMemsetD32Async(*w, self.k.get(), 1, self.aux.cu_stream()) },
                "cuMemsetD32Async",
            )?;
        }
        Ok(())
    }
}

/// Median microseconds of `op` on `d`'s stream (`op` gets the start event, for other streams
/// to wait on, and must leave `d`'s stream waiting for all its work), after one warm-up.
fn time_us(d: &Dev, reps: usize, op: &dyn Fn(&CudaEvent) -> Result<()>) -> Result<f64> {
    let ev = || {
        d.ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv("create event"))
    };
    let (a, b) = (ev()?, ev()?);
    a.record(&d.stream).map_err(drv("record"))?;
    op(&a)?;
    d.stream.synchronize().map_err(drv("synchronize"))?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        d.hold()?;
        a.record(&d.stream).map_err(drv("record"))?;
        op(&a)?;
        b.record(&d.stream).map_err(drv("record"))?;
        d.release()?;
        t.push(a.elapsed_ms(&b).map_err(drv("elapsed"))? as f64 * 1e3);
    }
    Ok(median(t))
}

/// Enqueues `cuMemcpyPeerAsync(dst <- src)` of `bytes` on `on`'s stream.
fn peer_copy(on: &Dev, dst: (&Dev, u64), src: (&Dev, u64), bytes: usize) -> Result<()> {
    on.ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: both addresses are live buffers of at least `bytes` on their devices, whose
    // contexts are live.
    check(
        unsafe {
            sys::cuMemcpyPeerAsync(
                dst.1,
                dst.0.ctx.cu_ctx(),
                src.1,
                src.0.ctx.cu_ctx(),
                bytes,
                on.stream.cu_stream(),
            )
        },
        "cuMemcpyPeerAsync",
    )
}

/// `on`'s stream waits for `other`'s stream: `other` waits on `start`, runs `work`, records its
/// done event, and `on` waits on that.
fn fork_join(
    on: &Dev,
    other: &Dev,
    start: &CudaEvent,
    work: impl FnOnce() -> Result<()>,
) -> Result<()> {
    other.stream.wait(start).map_err(drv("wait"))?;
    work()?;
    other.done.record(&other.stream).map_err(drv("record"))?;
    on.stream.wait(&other.done).map_err(drv("wait"))
}

/// A send (or receive) of `bytes` at `buf` on `d`'s stream through `comm`, with rank `peer`.
fn p2p(
    send: bool,
    d: &Dev,
    buf: u64,
    bytes: usize,
    comm: &mercury_runtime::cuda::nccl::Comm,
    peer: usize,
) -> P2p {
    P2p {
        send,
        buf,
        bytes,
        peer: peer as i32,
        comm: comm.raw(),
        stream: d.stream.cu_stream() as ns::cudaStream_t,
    }
}

/// Timed repetitions for a transfer of `bytes`: 5x `reps` up to 1 MiB, where one run is
/// noisier.
fn reps_for(reps: usize, bytes: usize) -> usize {
    if bytes <= 1 << 20 {
        reps.max(1) * 5
    } else {
        reps.max(1)
    }
}

/// The device-to-device copy on `d` at each of `sizes` ([`time_us`] medians).
fn local_copy_samples(d: &Dev, sizes: &[usize], reps: usize) -> Result<Vec<Sample>> {
    let mut samples = Vec::with_capacity(sizes.len());
    for &bytes in sizes {
        let us = time_us(d, reps_for(reps, bytes), &|_| {
            d.ctx.bind_to_thread().map_err(drv("bind"))?;
            // SAFETY: both buffers hold at least `bytes` on this device.
            check(
                unsafe { sys::cuMemcpyDtoDAsync_v2(d.b, d.a, bytes, d.stream.cu_stream()) },
                "cuMemcpyDtoDAsync",
            )
        })?;
        samples.push(Sample { bytes, us });
    }
    Ok(samples)
}

/// The CUDA driver API version ("13.0") and the NCCL version, when the library loads.
fn versions() -> Result<(String, Option<String>)> {
    let mut v = 0i32;
    // SAFETY: valid out-pointer.
    check(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    let nccl = mercury_runtime::cuda::nccl::version()
        .ok()
        .map(|(a, b, c)| format!("{a}.{b}.{c}"));
    Ok((format!("{}.{}", v / 1000, (v % 1000) / 10), nccl))
}

fn info(ctx: &Arc<CudaContext>) -> Result<DeviceInfo> {
    let attr = |a| {
        ctx.attribute(a)
            .map_err(drv("device attribute"))
            .map(|v| v.max(0) as usize)
    };
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(drv("device name"))?,
        total_bytes: ctx.total_mem().map_err(drv("total mem"))?,
        sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        copy_engines: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
    })
}

/// Measures every visible GPU (or the first `max_devices`), every ordered pair and every
/// unordered pair both ways (see the module docs).
///
/// # Errors
/// No GPU, CUDA failures, out of memory (two buffers of the largest size per GPU). An NCCL
/// failure only drops the NCCL rows (with a note).
pub fn measure(opts: &MeasureOptions) -> Result<LinkReport> {
    mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver)?;
    let visible = CudaContext::device_count()
        .map_err(drv("device count"))?
        .max(0) as usize;
    let n = opts.max_devices.map_or(visible, |m| m.min(visible));
    if n == 0 {
        return Err(RuntimeError::Unsupported("no GPU visible".into()));
    }
    let mut sizes = opts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let max = *sizes
        .last()
        .ok_or_else(|| RuntimeError::Unsupported("no transfer sizes given".into()))?;
    let ctxs: Vec<Arc<CudaContext>> = (0..n)
        .map(mercury_kernels::cuda::open_context)
        .collect::<std::result::Result<_, _>>()?;
    let devices = ctxs.iter().map(info).collect::<Result<Vec<_>>>()?;
    let mut notes = Vec::new();
    let mut staged = Vec::new();
    if n > 1 {
        let (m, warnings) = mercury_runtime::cuda::executor::enable_peer_access(&ctxs)?;
        notes.extend(warnings);
        staged = m.staged_pairs();
    }
    let devs: Vec<Dev> = ctxs
        .iter()
        .map(|c| Dev::new(c.clone(), max))
        .collect::<Result<_>>()?;
    if devs.iter().any(|d| d.gate.is_none()) {
        notes.push("stream memory operations (cuStreamWaitValue32) unavailable: times include the host's enqueue of each call".into());
    }
    let reps_for = |bytes: usize| reps_for(opts.reps, bytes);

    let mut local = Vec::new();
    for (i, d) in devs.iter().enumerate() {
        local.push(Sweep::new(
            Method::LocalCopy,
            i,
            i,
            local_copy_samples(d, &sizes, opts.reps)?,
        ));
    }

    // NCCL: one communicator over every GPU (rank i on GPU i), as the NCCL transport's world.
    let comms = if opts.nccl && n > 1 {
        match mercury_runtime::cuda::nccl::Comm::init_all(&(0..n).collect::<Vec<_>>()) {
            Ok(c) => Some(c),
            Err(e) => {
                notes.push(format!("NCCL not measured: {e}"));
                None
            }
        }
    } else {
        None
    };

    let mut pairs = Vec::new();
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let (di, dj) = (&devs[i], &devs[j]);
            let (mut pull, mut push, mut nccl) = (Vec::new(), Vec::new(), Vec::new());
            for &bytes in &sizes {
                let reps = reps_for(bytes);
                let us = time_us(dj, reps, &|_| peer_copy(dj, (dj, dj.b), (di, di.a), bytes))?;
                pull.push(Sample { bytes, us });
                let us = time_us(di, reps, &|_| peer_copy(di, (dj, dj.b), (di, di.a), bytes))?;
                push.push(Sample { bytes, us });
                if let Some(c) = &comms {
                    let ops = [
                        p2p(true, di, di.a, bytes, &c[i], j),
                        p2p(false, dj, dj.b, bytes, &c[j], i),
                    ];
                    let us = time_us(di, reps, &|start| {
                        fork_join(di, dj, start, || {
                            // SAFETY: `a` of GPU i and `b` of GPU j hold at least `bytes`.
                            unsafe { group_send_recv(&ops) }
                        })
                    })?;
                    nccl.push(Sample { bytes, us });
                }
            }
            pairs.push(Sweep::new(Method::CopyPull, i, j, pull));
            pairs.push(Sweep::new(Method::CopyPush, i, j, push));
            if comms.is_some() {
                pairs.push(Sweep::new(Method::Nccl, i, j, nccl));
            }
        }
    }

    // Both directions at once, at the largest size up to 256 MiB.
    let mut both = Vec::new();
    let bytes = sizes
        .iter()
        .copied()
        .filter(|b| *b <= 256 << 20)
        .max()
        .unwrap_or(max);
    for i in 0..n {
        for j in i + 1..n {
            let (di, dj) = (&devs[i], &devs[j]);
            let us = time_us(di, opts.reps.max(1), &|start| {
                fork_join(di, dj, start, || {
                    peer_copy(dj, (dj, dj.b), (di, di.a), bytes)?;
                    peer_copy(di, (di, di.b), (dj, dj.a), bytes)
                })
            })?;
            both.push(BothWays {
                a: i,
                b: j,
                method: Method::CopyPull,
                bytes,
                gbs: bytes as f64 / (us * 1e3),
            });
            if let Some(c) = &comms {
                let ops = [
                    p2p(true, di, di.a, bytes, &c[i], j),
                    p2p(true, dj, dj.a, bytes, &c[j], i),
                    p2p(false, di, di.b, bytes, &c[i], j),
                    p2p(false, dj, dj.b, bytes, &c[j], i),
                ];
                let us = time_us(di, opts.reps.max(1), &|start| {
                    fork_join(di, dj, start, || {
                        // SAFETY: every buffer holds at least `bytes` on its GPU.
                        unsafe { group_send_recv(&ops) }
                    })
                })?;
                both.push(BothWays {
                    a: i,
                    b: j,
                    method: Method::Nccl,
                    bytes,
                    gbs: bytes as f64 / (us * 1e3),
                });
            }
        }
    }
    for d in &devs {
        d.stream.synchronize().map_err(drv("synchronize"))?;
    }
    drop(comms);

    let (cuda, nccl) = versions()?;
    let driver = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| parse_driver_version(&t));
    Ok(LinkReport {
        devices,
        local,
        pairs,
        both,
        staged,
        sizes,
        reps: opts.reps.max(1),
        notes,
        cuda,
        driver,
        nccl,
    })
}
