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

pub mod two_tier;

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

/// `64 KiB`, `256 MiB`, `1 GiB`.
pub fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

fn fit_text(s: &Sweep) -> String {
    match &s.fit {
        Some(f) => format!(
            "{:.2} us + bytes / {:.1} GB/s",
            f.latency_us,
            s.method.factor() * f.gbs
        ),
        None => "-".into(),
    }
}

/// The measurements as a markdown table: GB/s per size (read + write for local copies), the
/// fit and its largest error; then both-ways rows and notes.
pub fn table(r: &LinkReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "links: {} x {}, CUDA {}{}{}; median of {} gated CUDA-event-timed runs per size ({} up to 1 MiB)",
        r.devices.len(),
        r.devices.first().map_or("?", |d| d.name.as_str()),
        r.cuda,
        r.driver
            .as_ref()
            .map(|d| format!(", driver {d}"))
            .unwrap_or_default(),
        r.nccl
            .as_ref()
            .map(|d| format!(", NCCL {d}"))
            .unwrap_or_default(),
        r.reps,
        r.reps * 5
    );
    let mut head = "| link (GB/s) |".to_string();
    let mut rule = "| --- |".to_string();
    for s in &r.sizes {
        let _ = write!(head, " {} |", size_label(*s));
        rule.push_str(" ---: |");
    }
    head.push_str(" fit: latency + bytes / bandwidth | max fit error |");
    rule.push_str(" --- | ---: |");
    let _ = writeln!(o, "{head}\n{rule}");
    for s in r.local.iter().chain(&r.pairs) {
        let mut line = format!("| {} |", s.label());
        for size in &r.sizes {
            match s.samples.iter().find(|x| x.bytes == *size) {
                Some(x) => {
                    let _ = write!(line, " {:.1} |", s.rate(x));
                }
                None => line.push_str(" - |"),
            }
        }
        let _ = write!(
            line,
            " {} | {} |",
            fit_text(s),
            s.fit
                .map_or("-".into(), |f| format!("{:.0}%", 100.0 * f.max_err))
        );
        let _ = writeln!(o, "{line}");
    }
    for b in &r.both {
        let _ = writeln!(
            o,
            "both ways at once, GPU {} <-> {}, {} at {}: {:.1} GB/s per direction",
            b.a,
            b.b,
            match b.method {
                Method::Nccl => "NCCL send/recv",
                _ => "pulled peer copies",
            },
            size_label(b.bytes),
            b.gbs
        );
    }
    for (a, b) in &r.staged {
        let _ = writeln!(
            o,
            "WARNING: GPU {a} cannot access GPU {b} (no peer access): copies are staged through host memory"
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A patch rate (TFLOP/s) as the topology file writes it: one decimal from 1 up, as before,
/// and below 1 every digit (`5e-3`): one decimal wrote a rate of 0.01 given on the command line
/// as `0.0`, which the loader refuses.
fn rate_toml(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:e}")
    }
}

/// The topology file of `report` (see the module docs); `name` is the topology's name, `source`
/// the method its link level describes (falls back to pulled copies when NCCL was not
/// measured).
/// The measured rate tables as `[[device.rates.*_points]]` tables (nothing without them).
pub fn write_rate_points(o: &mut String, rates: &Rates) {
    for p in &rates.gemm_points {
        let _ = writeln!(o, "[[device.rates.gemm_points]]");
        let _ = writeln!(
            o,
            "m = {}\nn = {}\nk = {}\ntflops = {:.1}\n",
            p.m, p.n, p.k, p.tflops
        );
    }
    for p in &rates.attention_points {
        let _ = writeln!(o, "[[device.rates.attention_points]]");
        let _ = writeln!(
            o,
            "heads = {}\nsq = {}\nsk = {}\nd = {}\ncausal = {}\ntflops = {:.1}\n",
            p.heads, p.sq, p.sk, p.d, p.causal, p.tflops
        );
    }
}

pub fn topology_toml(report: &LinkReport, name: &str, rates: &Rates, source: LinkSource) -> String {
    let n = report.devices.len();
    let d0 = &report.devices[0];
    let hbm = median(report.local.iter().map(Sweep::bandwidth).collect());
    let mut o = String::new();
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
        "# Sizes {} to {}, median of {} gated CUDA-event-timed runs per size after a warm-up;",
        report.sizes.first().map_or("-".into(), |s| size_label(*s)),
        report.sizes.last().map_or("-".into(), |s| size_label(*s)),
        report.reps
    );
    let _ = writeln!(
        o,
        "# each sweep fitted as latency + bytes / bandwidth (least squares on relative error)."
    );
    for s in report.local.iter().chain(&report.pairs) {
        let times: Vec<String> = s
            .samples
            .iter()
            .map(|x| format!("{} {:.1} us", size_label(x.bytes), x.us))
            .collect();
        let _ = writeln!(
            o,
            "#   {}: {} (max error {}); {}",
            s.label(),
            fit_text(s),
            s.fit
                .map_or("-".into(), |f| format!("{:.0}%", 100.0 * f.max_err)),
            times.join(", ")
        );
    }
    for b in &report.both {
        let _ = writeln!(
            o,
            "#   GPU {} <-> {} both ways at once ({:?}, {}): {:.1} GB/s per direction",
            b.a,
            b.b,
            b.method,
            size_label(b.bytes),
            b.gbs
        );
    }
    for note in &report.notes {
        let _ = writeln!(o, "# note: {note}");
    }
    let _ = writeln!(o, "name = {}", toml_str(name));
    let mut method = source.method();
    if report.pair_sweeps(method).is_empty() {
        method = Method::CopyPull;
    }
    let desc = if n > 1 {
        format!(
            "{n} x {} on one node, link level from {} (measured)",
            d0.name,
            method.describe()
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
        "# Measured: median over the GPUs of the fitted device-to-device copy (read + write bytes)."
    );
    let _ = writeln!(o, "hbm_bandwidth_gbs = {hbm:.1}");
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
    let _ = writeln!(o, "gemm_tflops = {}", rate_toml(rates.gemm_tflops));
    let _ = writeln!(
        o,
        "attention_tflops = {}",
        rate_toml(rates.attention_tflops)
    );
    let _ = writeln!(
        o,
        "attention_causal_tflops = {}",
        rate_toml(rates.attention_causal_tflops)
    );
    let _ = writeln!(o);
    write_rate_points(&mut o, rates);
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
    let sweeps = report.pair_sweeps(method);
    if sweeps.is_empty() {
        let lat = median(report.local.iter().map(Sweep::latency_us).collect());
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
        let _ = writeln!(o, "latency_us = {:.2}", lat.max(0.0));
    } else {
        let bws: Vec<f64> = sweeps.iter().map(|s| s.bandwidth()).collect();
        let (lo, hi) = (
            bws.iter().copied().fold(f64::INFINITY, f64::min),
            bws.iter().copied().fold(0.0, f64::max),
        );
        let bw = median(bws);
        let lat = median(sweeps.iter().map(|s| s.latency_us()).collect());
        let _ = writeln!(
            o,
            "link = {}",
            toml_str(&format!(
                "{}: min {lo:.1} / median {bw:.1} / max {hi:.1} GB/s one way{}",
                method.describe(),
                if report.staged.is_empty() {
                    String::new()
                } else {
                    format!(", {} pair(s) without peer access", report.staged.len())
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
            "# Measured: median over pairs of the fitted bandwidth and latency (efficiency 1: the"
        );
        let _ = writeln!(o, "# figure is already what transfers reach).");
        let _ = writeln!(o, "bandwidth_gbs = {bw:.1}");
        let _ = writeln!(o, "efficiency = 1.0");
        let _ = writeln!(o, "latency_us = {:.2}", lat.max(0.0));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of exactly `lat + bytes / gbs`.
    fn line(lat: f64, gbs: f64, sizes: &[usize]) -> Vec<Sample> {
        sizes
            .iter()
            .map(|&bytes| Sample {
                bytes,
                us: lat + bytes as f64 / (gbs * 1e3),
            })
            .collect()
    }

    #[test]
    fn size_ladder() {
        let s = sizes(64 << 10, 1 << 30);
        assert_eq!(s.len(), 8);
        assert_eq!(s[0], 64 << 10);
        assert_eq!(*s.last().unwrap(), 1 << 30);
        assert_eq!(sizes(64 << 10, 100 << 10), vec![64 << 10]);
        assert!(sizes(2, 1).is_empty());
        assert_eq!(size_label(64 << 10), "64 KiB");
        assert_eq!(size_label(256 << 20), "256 MiB");
        assert_eq!(size_label(1 << 30), "1 GiB");
        assert_eq!(size_label(1000), "1000 B");
    }

    #[test]
    fn fit_recovers_latency_and_bandwidth() {
        let s = line(4.5, 372.0, &sizes(64 << 10, 1 << 30));
        let f = fit(&s).unwrap();
        assert!((f.latency_us - 4.5).abs() < 1e-6, "{f:?}");
        assert!((f.gbs - 372.0).abs() < 1e-6, "{f:?}");
        assert!(f.max_err < 1e-9);
        assert!((f.predict_us(1 << 30) - s[7].us).abs() < 1e-6);
        // Noise of +-5% alternating: the fit stays close and reports an error near 5%.
        let noisy: Vec<Sample> = s
            .iter()
            .enumerate()
            .map(|(i, x)| Sample {
                bytes: x.bytes,
                us: x.us * if i % 2 == 0 { 1.05 } else { 0.95 },
            })
            .collect();
        let f = fit(&noisy).unwrap();
        assert!((f.gbs / 372.0 - 1.0).abs() < 0.1, "{f:?}");
        assert!((0.03..0.08).contains(&f.max_err), "{f:?}");
        // A negative intercept is clamped: bandwidth through the origin.
        let s = vec![
            Sample {
                bytes: 1000,
                us: 1.0,
            },
            Sample {
                bytes: 3000,
                us: 4.0,
            },
        ];
        let f = fit(&s).unwrap();
        assert_eq!(f.latency_us, 0.0);
        assert!(f.gbs > 0.0);
        // Too little data, or nonsense.
        assert!(fit(&s[..1]).is_none());
        assert!(fit(&[]).is_none());
        let flat = vec![Sample { bytes: 10, us: 5.0 }, Sample { bytes: 20, us: 5.0 }];
        assert!(fit(&flat).is_none(), "zero slope has no bandwidth");
    }

    fn report(n: usize, nccl: bool) -> LinkReport {
        let sz = sizes(64 << 10, 1 << 30);
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
            .map(|i| Sweep::new(Method::LocalCopy, i, i, line(2.0, 2080.0, &sz)))
            .collect();
        let mut pairs = Vec::new();
        let mut both = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let bw = 370.0 + (a + b) as f64;
                    pairs.push(Sweep::new(Method::CopyPull, a, b, line(4.0, bw, &sz)));
                    pairs.push(Sweep::new(Method::CopyPush, a, b, line(3.0, bw, &sz)));
                    if nccl {
                        pairs.push(Sweep::new(Method::Nccl, a, b, line(9.0, 345.0, &sz)));
                    }
                    if a < b {
                        both.push(BothWays {
                            a,
                            b,
                            method: Method::CopyPull,
                            bytes: 256 << 20,
                            gbs: 360.0,
                        });
                    }
                }
            }
        }
        LinkReport {
            devices,
            local,
            pairs,
            both,
            staged: vec![],
            sizes: sz,
            reps: 10,
            notes: vec![],
            cuda: "13.0".into(),
            driver: Some("580.159.04".into()),
            nccl: nccl.then(|| "2.28.3".into()),
        }
    }

    /// The written files load and validate with the search's own topology parser, and carry
    /// the fitted figures of the chosen method.
    #[test]
    fn written_topologies_validate() {
        for n in [1, 2, 8] {
            for source in [LinkSource::Copy, LinkSource::Nccl] {
                let text = topology_toml(
                    &report(n, true),
                    &format!("measured-{n}"),
                    &Rates::default(),
                    source,
                );
                let t = mercury_search::topology::Topology::from_toml_str(&text, "measured")
                    .unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(t.levels.len(), 1);
                assert_eq!(t.levels[0].size, n);
                assert_eq!(t.device.copy_engines, 3);
                assert!((t.device.hbm_bandwidth_gbs - 4160.0).abs() < 0.1, "{text}");
                assert_eq!(t.environment.nccl.as_deref(), Some("2.28.3"));
                if n > 1 {
                    let (bw, lat) = match source {
                        LinkSource::Copy => (370.0 + n as f64, 4.0),
                        LinkSource::Nccl => (345.0, 9.0),
                    };
                    assert!(
                        (t.levels[0].bandwidth_gbs - bw).abs() < n as f64 + 1.0,
                        "{text}"
                    );
                    assert!((t.levels[0].latency_us - lat).abs() < 0.01, "{text}");
                    assert!(text.contains("GPU 0 -> 1 NCCL send/recv"));
                    assert!(text.contains("both ways at once"));
                } else {
                    assert!(text.contains("only the local copy"));
                }
            }
        }
        // As a file, through the loader `mercury-tune --topology FILE` uses.
        let path = std::env::temp_dir().join(format!("mercury-links-{}.toml", std::process::id()));
        let text = topology_toml(
            &report(2, true),
            "file",
            &Rates::default(),
            LinkSource::Copy,
        );
        std::fs::write(&path, &text).unwrap();
        let t = mercury_search::topology::Topology::load(path.to_str().unwrap());
        let _ = std::fs::remove_file(&path);
        assert_eq!(t.unwrap_or_else(|e| panic!("{e}\n{text}")).name, "file");
        // Without NCCL figures, an NCCL file falls back to the pulled copies.
        let text = topology_toml(&report(2, false), "x", &Rates::default(), LinkSource::Nccl);
        assert!(text.contains("link = \"peer copy pulled"), "{text}");
        // Uneven and staged pairs are flagged.
        let mut r = report(2, false);
        r.pairs[0] = Sweep::new(Method::CopyPull, 0, 1, line(20.0, 25.0, &r.sizes));
        r.staged = vec![(0, 1)];
        let text = topology_toml(&r, "uneven", &Rates::default(), LinkSource::Copy);
        assert!(text.contains("WARNING") && text.contains("without peer access"));
        assert!(mercury_search::topology::Topology::from_toml_str(&text, "u").is_ok());
    }

    #[test]
    fn given_rates_are_written_as_given() {
        // The ends of the range a topology file accepts (mercury-mgpu checks given rates
        // against it): each reads back as written, none as `0.0`.
        for (g, a, c) in [(1e-6, 0.01, 1e6), (0.5, 612.0, 0.04), (803.0, 1.0, 0.99)] {
            let rates = Rates {
                gemm_tflops: g,
                attention_tflops: a,
                attention_causal_tflops: c,
                ..Rates::default()
            };
            let text = topology_toml(&report(2, true), "given", &rates, LinkSource::Copy);
            let t = mercury_search::topology::Topology::from_toml_str(&text, "given")
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            let r = &t.device.rates;
            assert_eq!(
                (r.gemm_tflops, r.attention_tflops, r.attention_causal_tflops),
                (g, a, Some(c)),
                "{text}"
            );
        }
        // One decimal from 1 up, as before.
        assert_eq!(rate_toml(803.0), "803.0");
        assert_eq!(rate_toml(612.345), "612.3");
        assert_eq!(rate_toml(0.01), "1e-2");
    }

    #[test]
    fn measured_rate_tables_round_trip() {
        use mercury_search::topology::{AttentionPoint, GemmPoint};
        let gemm = vec![
            GemmPoint {
                m: 512,
                n: 4096,
                k: 8192,
                tflops: 690.5,
            },
            GemmPoint {
                m: 8192,
                n: 8192,
                k: 8192,
                tflops: 790.0,
            },
        ];
        let att = |sq: usize, causal: bool, tflops: f64| AttentionPoint {
            heads: 32,
            sq,
            sk: sq,
            d: 128,
            causal,
            tflops,
        };
        let attention = vec![
            att(16384, false, 668.0),
            att(32768, false, 640.0),
            att(32768, true, 600.0),
        ];
        let rates = Rates::measured(gemm.clone(), attention.clone(), "measured here".into());
        // The single figures are the points at the anchor shapes.
        assert_eq!(
            (
                rates.gemm_tflops,
                rates.attention_tflops,
                rates.attention_causal_tflops
            ),
            (790.0, 640.0, 600.0)
        );
        let text = topology_toml(&report(2, true), "rates", &rates, LinkSource::Copy);
        let t = mercury_search::topology::Topology::from_toml_str(&text, "rates")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(t.device.rates.gemm_points, gemm);
        assert_eq!(t.device.rates.attention_points, attention);
        assert_eq!(t.device.rates.gemm_tflops, 790.0);
        assert!(text.contains("# measured here"));
        // Without the anchor shapes: the medians.
        let r = Rates::measured(gemm[..1].to_vec(), attention[..1].to_vec(), String::new());
        assert_eq!((r.gemm_tflops, r.attention_tflops), (690.5, 668.0));
        assert_eq!(
            r.attention_causal_tflops,
            Rates::default().attention_causal_tflops
        );
    }

    #[test]
    fn table_lists_every_sweep() {
        let mut r = report(2, true);
        r.staged = vec![(1, 0)];
        r.notes = vec!["something to know".into()];
        let t = table(&r);
        assert!(t.contains("| link (GB/s) | 64 KiB |"), "{t}");
        assert!(t.contains("| GPU 0 local copy |"), "{t}");
        assert!(t.contains("| GPU 1 -> 0 copy, pulled |"), "{t}");
        assert!(t.contains("| GPU 0 -> 1 NCCL send/recv |"), "{t}");
        assert!(t.contains("4.00 us + bytes / 371.0 GB/s | 0% |"), "{t}");
        assert!(t.contains("2.00 us + bytes / 4160.0 GB/s"), "{t}");
        assert!(t.contains("both ways at once, GPU 0 <-> 1"), "{t}");
        assert!(t.contains("WARNING: GPU 1 cannot access GPU 0"), "{t}");
        assert!(t.contains("note: something to know"), "{t}");
        // 3 methods per ordered pair + 2 local sweeps, one row each.
        assert_eq!(t.lines().filter(|l| l.starts_with("| GPU")).count(), 2 + 6);
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
        let opts = MeasureOptions {
            sizes: sizes(64 << 10, 4 << 20),
            reps: 3,
            max_devices: Some(2),
            nccl: false,
        };
        let r = match measure(&opts) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipping GPU test: {e}");
                return;
            }
        };
        assert!(r.local.iter().all(|x| x.bandwidth() > 0.0));
        let text = topology_toml(&r, "probe", &Rates::default(), LinkSource::Copy);
        mercury_search::topology::Topology::from_toml_str(&text, "probe")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
