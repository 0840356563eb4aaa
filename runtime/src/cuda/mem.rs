//! Device memory of the ranks as plain addresses, per-stream scratch arenas, and the copy
//! engine (linear copies, 2-D copies, packing through scratch, f32/bf16 casts).
//!
//! Multi-device: a [`Loc`] may name its device (`dev`); a copy whose source or destination
//! lies on another device than the stream's goes through the copy engine's peer copies
//! (`cuMemcpyPeerAsync`, `cuMemcpy3DPeerAsync`, given the [`Peers`] contexts). Kernels
//! (casts, combines, strided-copy fallbacks) only ever touch memory of the stream's own
//! device: remote operands are first copied into local scratch ([`operand`]). A copy whose
//! two ends are both on other devices than the stream's is refused (transports pull or push
//! from one end).

use super::device_kernels::DeviceKernels;
use super::error::{check, Result, RuntimeError};
use super::layout::{plan_copy, Block2D, CopyPlan, StridedRegion};
use cudarc::driver::sys;
use cudarc::driver::CudaStream;
use mercury_kernels::cuda::{alloc_bytes, DeviceBuffer};
use mercury_plan::{DType, Region, View};
use std::sync::Arc;

/// Where a slot lives: device address, element type and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    pub ptr: u64,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Addresses of every slot of every rank (index: rank, slot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemTable {
    pub ranks: Vec<Vec<SlotInfo>>,
    /// Device ordinal of each rank (empty: every rank on the stream's device, the virtual
    /// mode; locations then carry no device).
    pub devs: Vec<usize>,
    /// Ranks driven by another process (their slots carry shapes and types, address 0); empty:
    /// none.
    pub remote: Vec<bool>,
}

/// A region of device memory: base address of its tensor, element type, strided region, and
/// the device ordinal it lives on (`None`: the device of the stream that uses it, as for
/// scratch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub base: u64,
    pub dtype: DType,
    pub reg: StridedRegion,
    pub dev: Option<usize>,
}

impl Loc {
    /// Element size in bytes.
    pub fn es(&self) -> usize {
        self.dtype.size_bytes()
    }
    /// Address of the first element when the region is contiguous.
    pub fn contiguous_ptr(&self) -> Option<u64> {
        self.reg
            .is_contiguous()
            .then(|| self.base + (self.reg.offset * self.es()) as u64)
    }
    /// Bytes of the region's elements.
    pub fn bytes(&self) -> usize {
        self.reg.numel() * self.es()
    }
    /// A dense region of `n` elements at `ptr`.
    pub fn dense(ptr: u64, dtype: DType, n: usize) -> Loc {
        Loc {
            base: ptr,
            dtype,
            reg: StridedRegion::linear(0, n),
            dev: None,
        }
    }
    /// Region `region` of a row-major tensor of `shape` at `base`.
    pub fn of(base: u64, dtype: DType, shape: &[usize], region: &Region) -> Result<Loc> {
        Ok(Loc {
            base,
            dtype,
            reg: StridedRegion::new(shape, region).map_err(RuntimeError::Schedule)?,
            dev: None,
        })
    }
    /// The same region, placed on device `dev` (`None`: the stream's device).
    pub fn on(mut self, dev: Option<usize>) -> Loc {
        self.dev = dev;
        self
    }
    /// Whether the region lives on device `here` (the device of the stream using it).
    pub fn is_on(&self, here: usize) -> bool {
        self.dev.is_none_or(|d| d == here)
    }
}

impl MemTable {
    /// The slot a view names.
    pub fn slot(&self, rank: usize, slot: usize) -> Result<&SlotInfo> {
        self.ranks
            .get(rank)
            .and_then(|r| r.get(slot))
            .ok_or_else(|| RuntimeError::Schedule(format!("rank {rank} has no slot {slot}")))
    }
    /// The memory of `view` on `rank` (an error for ranks of other processes).
    pub fn loc(&self, rank: usize, view: &View) -> Result<Loc> {
        if self.is_remote(rank) {
            return Err(RuntimeError::Schedule(format!(
                "rank {rank} is driven by another process; its memory is not addressable here"
            )));
        }
        self.meta(rank, view)
    }
    /// Shape, type and device of `view` on `rank`, also for ranks of other processes (whose
    /// address is then 0: only for sizes and checks).
    pub fn meta(&self, rank: usize, view: &View) -> Result<Loc> {
        let s = self.slot(rank, view.slot)?;
        Ok(Loc::of(s.ptr, s.dtype, &s.shape, &view.region)?.on(self.devs.get(rank).copied()))
    }
    /// Whether `rank` is driven by another process.
    pub fn is_remote(&self, rank: usize) -> bool {
        self.remote.get(rank).copied().unwrap_or(false)
    }
}

/// A bump allocator over one device buffer, used by one stream. `reset` at the start of each
/// operation; growing keeps the old buffers alive (work already queued may still use them)
/// until `release_old`, which the executor calls after the device is idle.
pub struct Scratch {
    stream: Arc<CudaStream>,
    cur: Option<DeviceBuffer>,
    ptr: u64,
    cap: usize,
    used: usize,
    old: Vec<DeviceBuffer>,
}

impl Scratch {
    pub fn new(stream: Arc<CudaStream>) -> Self {
        Scratch {
            stream,
            cur: None,
            ptr: 0,
            cap: 0,
            used: 0,
            old: Vec::new(),
        }
    }

    /// Forget the current operation's temporaries (stream order keeps earlier users safe).
    pub fn reset(&mut self) {
        self.used = 0;
    }

    /// `bytes` of scratch, 256-byte aligned.
    pub fn take(&mut self, bytes: usize) -> Result<u64> {
        let need = bytes.div_ceil(256) * 256;
        if self.used + need > self.cap {
            let cap = (2 * self.cap).max(need).max(1 << 20);
            // SAFETY: scratch contents are always written before they are read.
            let buf = unsafe { alloc_bytes(&self.stream, cap, "alloc scratch") }?;
            let ptr = buf.ptr();
            if let Some(old) = self.cur.replace(buf) {
                self.old.push(old);
            }
            self.ptr = ptr;
            self.cap = cap;
            self.used = 0;
        }
        let p = self.ptr + self.used as u64;
        self.used += need;
        Ok(p)
    }

    /// Frees buffers replaced by growth; only call when no queued work can use them.
    pub fn release_old(&mut self) {
        self.old.clear();
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }
}

/// The contexts of an executor's devices, by device id (the ids of `Loc::dev`; the CUDA
/// ordinal, unless several ids alias one GPU to exercise the peer paths on one device): what
/// peer copies name as their source and destination contexts.
#[derive(Debug, Default)]
pub struct Peers {
    ctx: Vec<(usize, sys::CUcontext)>,
}

// SAFETY: a CUcontext handle is a plain identifier the driver accepts from any thread; the
// contexts are owned (kept alive) by the executor that owns this table.
unsafe impl Send for Peers {}
// SAFETY: as above; the table is never mutated after construction.
unsafe impl Sync for Peers {}

impl Peers {
    /// The table of `(ordinal, context)` pairs.
    pub fn new(ctx: Vec<(usize, sys::CUcontext)>) -> Peers {
        Peers { ctx }
    }
    fn ctx(&self, ordinal: usize) -> Result<sys::CUcontext> {
        self.ctx
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                RuntimeError::Unsupported(format!(
                    "no context of device {ordinal} in this executor"
                ))
            })
    }
}

/// Everything a copy needs: the stream, its scratch, the device kernels (casts) and the
/// device's largest 2-D copy pitch; `peers` (multi-device executors) for copies from or to
/// other devices.
pub struct CopyCx<'a> {
    pub stream: &'a CudaStream,
    pub scratch: &'a mut Scratch,
    pub dk: &'a DeviceKernels,
    pub max_pitch: usize,
    pub peers: Option<&'a Peers>,
    /// Device id of the stream (the ids locations carry in `Loc::dev`; 0 without `peers`).
    pub here: usize,
}

impl CopyCx<'_> {
    /// Device id of the stream's device.
    pub fn here(&self) -> usize {
        self.here
    }
}

/// Enqueues a copy of `bytes` bytes from device `sdev` to device `ddev` (peer copy through the
/// copy engine; the driver stages it through host memory where peer access is unavailable).
///
/// # Safety
/// Both ranges must be device memory of the named devices, whose contexts `peers` holds.
pub unsafe fn memcpy_peer(
    stream: &CudaStream,
    peers: &Peers,
    dst: u64,
    ddev: usize,
    src: u64,
    sdev: usize,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let (dc, sc) = (peers.ctx(ddev)?, peers.ctx(sdev)?);
    // SAFETY: per the caller; the contexts are live.
    check(
        unsafe { sys::cuMemcpyPeerAsync(dst, dc, src, sc, bytes, stream.cu_stream()) },
        "cuMemcpyPeerAsync",
    )
}

/// Copies one 2-D block pair between devices (`cuMemcpy3DPeerAsync` with depth 1; row by row
/// when a pitch exceeds the device's limit).
///
/// # Safety
/// Both blocks must lie in device memory at the given bases on the named devices.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_block_peer(
    cx: &CopyCx<'_>,
    peers: &Peers,
    es: usize,
    sbase: u64,
    sdev: usize,
    s: &Block2D,
    dbase: u64,
    ddev: usize,
    d: &Block2D,
) -> Result<()> {
    let sp = sbase + (s.offset * es) as u64;
    let dp = dbase + (d.offset * es) as u64;
    let width = s.cols * es;
    if s.rows == 1 || (s.stride == s.cols && d.stride == d.cols) {
        // SAFETY: per the caller (one run of rows * cols elements on both sides).
        return unsafe { memcpy_peer(cx.stream, peers, dp, ddev, sp, sdev, s.rows * width) };
    }
    let (spitch, dpitch) = (s.stride * es, d.stride * es);
    if spitch <= cx.max_pitch && dpitch <= cx.max_pitch {
        let p = sys::CUDA_MEMCPY3D_PEER {
            srcXInBytes: 0,
            srcY: 0,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: sp,
            srcArray: std::ptr::null_mut(),
            srcContext: peers.ctx(sdev)?,
            srcPitch: spitch,
            srcHeight: s.rows,
            dstXInBytes: 0,
            dstY: 0,
            dstZ: 0,
            dstLOD: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dp,
            dstArray: std::ptr::null_mut(),
            dstContext: peers.ctx(ddev)?,
            dstPitch: dpitch,
            dstHeight: s.rows,
            WidthInBytes: width,
            Height: s.rows,
            Depth: 1,
        };
        // SAFETY: the descriptor describes device memory per the caller; it is read during
        // the call only.
        return check(
            unsafe { sys::cuMemcpy3DPeerAsync(&p, cx.stream.cu_stream()) },
            "cuMemcpy3DPeerAsync",
        );
    }
    for r in 0..s.rows {
        // SAFETY: per the caller, row by row.
        unsafe {
            memcpy_peer(
                cx.stream,
                peers,
                dp + (r * dpitch) as u64,
                ddev,
                sp + (r * spitch) as u64,
                sdev,
                width,
            )?
        };
    }
    Ok(())
}

/// A block copy between any two devices: the local path (2-D copies, kernel fallback) when
/// both ends are on the stream's device, else the peer path.
///
/// # Safety
/// As [`copy_block_peer`].
#[allow(clippy::too_many_arguments)]
unsafe fn copy_block_any(
    cx: &CopyCx<'_>,
    es: usize,
    sbase: u64,
    sdev: usize,
    s: &Block2D,
    dbase: u64,
    ddev: usize,
    d: &Block2D,
) -> Result<()> {
    let here = cx.here();
    if sdev == here && ddev == here {
        // SAFETY: per the caller.
        return unsafe { copy_block(cx, es, sbase, s, dbase, d) };
    }
    let peers = cx.peers.ok_or_else(|| {
        RuntimeError::Unsupported("a copy between devices needs the executor's peer table".into())
    })?;
    // SAFETY: per the caller.
    unsafe { copy_block_peer(cx, peers, es, sbase, sdev, s, dbase, ddev, d) }
}

/// [`copy`] when at least one end is on another device than the stream's.
///
/// # Safety
/// As [`copy`], with each location on the device it names.
unsafe fn copy_cross(cx: &mut CopyCx<'_>, src: &Loc, dst: &Loc) -> Result<()> {
    let here = cx.here();
    let (sdev, ddev) = (src.dev.unwrap_or(here), dst.dev.unwrap_or(here));
    if sdev != here && ddev != here {
        return Err(RuntimeError::Unsupported(format!(
            "copy from device {sdev} to device {ddev} enqueued on a stream of device {here}"
        )));
    }
    let n = src.reg.numel();
    if src.dtype != dst.dtype {
        // Convert on this device: bring the source here first, or convert here and send.
        if sdev != here {
            let t = cx.scratch.take(src.bytes())?;
            let tl = Loc::dense(t, src.dtype, n);
            // SAFETY: `t` holds the packed source; the second copy is local -> maybe remote.
            unsafe {
                copy_cross(cx, src, &tl)?;
                return copy(cx, &tl, dst);
            }
        }
        let t = cx.scratch.take(n * dst.es())?;
        let tl = Loc::dense(t, dst.dtype, n);
        // SAFETY: the cast stays on this device; then a same-type copy to the remote end.
        unsafe {
            copy(cx, src, &tl)?;
            return copy_cross(cx, &tl, dst);
        }
    }
    let es = src.es();
    match plan_copy(&src.reg, &dst.reg).map_err(RuntimeError::Schedule)? {
        CopyPlan::Empty => Ok(()),
        CopyPlan::Linear {
            src: s,
            dst: d,
            len,
        } => {
            let peers = cx.peers.ok_or_else(|| {
                RuntimeError::Unsupported(
                    "a copy between devices needs the executor's peer table".into(),
                )
            })?;
            // SAFETY: per the caller.
            unsafe {
                memcpy_peer(
                    cx.stream,
                    peers,
                    dst.base + (d * es) as u64,
                    ddev,
                    src.base + (s * es) as u64,
                    sdev,
                    len * es,
                )
            }
        }
        CopyPlan::Blocks(pairs) => {
            for (s, d) in &pairs {
                // SAFETY: per the caller; blocks come from the two regions.
                unsafe { copy_block_any(cx, es, src.base, sdev, s, dst.base, ddev, d)? };
            }
            Ok(())
        }
        CopyPlan::Staged { src: sb, dst: db } => {
            let t = cx.scratch.take(src.bytes())?;
            let mut at = 0usize;
            for s in &sb {
                let c = Block2D {
                    offset: at,
                    rows: s.rows,
                    cols: s.cols,
                    stride: s.cols,
                };
                // SAFETY: packs into local scratch `t`, which holds all elements.
                unsafe { copy_block_any(cx, es, src.base, sdev, s, t, here, &c)? };
                at += s.numel();
            }
            at = 0;
            for d in &db {
                let c = Block2D {
                    offset: at,
                    rows: d.rows,
                    cols: d.cols,
                    stride: d.cols,
                };
                // SAFETY: unpacks from local scratch `t`.
                unsafe { copy_block_any(cx, es, t, here, &c, dst.base, ddev, d)? };
                at += d.numel();
            }
            Ok(())
        }
    }
}

/// Enqueues a device-to-device copy of `bytes` bytes.
///
/// # Safety
/// Both ranges must be device memory of the stream's context.
pub unsafe fn memcpy(stream: &CudaStream, dst: u64, src: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: per the caller.
    check(
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.cu_stream()) },
        "cuMemcpyDtoDAsync",
    )
}

/// Copies one 2-D block pair (equal rows and cols).
///
/// # Safety
/// Both blocks must lie in device memory at the given bases.
unsafe fn copy_block(
    cx: &CopyCx<'_>,
    es: usize,
    sbase: u64,
    s: &Block2D,
    dbase: u64,
    d: &Block2D,
) -> Result<()> {
    let sp = sbase + (s.offset * es) as u64;
    let dp = dbase + (d.offset * es) as u64;
    let width = s.cols * es;
    if s.rows == 1 || (s.stride == s.cols && d.stride == d.cols) {
        // SAFETY: per the caller (one run of rows * cols elements on both sides).
        return unsafe { memcpy(cx.stream, dp, sp, s.rows * width) };
    }
    let (spitch, dpitch) = (s.stride * es, d.stride * es);
    if spitch <= cx.max_pitch && dpitch <= cx.max_pitch {
        let p = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: sp,
            srcArray: std::ptr::null_mut(),
            srcPitch: spitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dp,
            dstArray: std::ptr::null_mut(),
            dstPitch: dpitch,
            WidthInBytes: width,
            Height: s.rows,
        };
        // SAFETY: the descriptor describes device memory per the caller; it is read during
        // the call only.
        return check(
            unsafe { sys::cuMemcpy2DAsync_v2(&p, cx.stream.cu_stream()) },
            "cuMemcpy2DAsync",
        );
    }
    if es == 2 || es == 4 {
        // SAFETY: per the caller; strides are in elements.
        return unsafe {
            cx.dk
                .copy_2d(cx.stream, es, dp, sp, s.rows, s.cols, d.stride, s.stride)
        };
    }
    for r in 0..s.rows {
        // SAFETY: per the caller, row by row.
        unsafe {
            memcpy(
                cx.stream,
                dp + (r * dpitch) as u64,
                sp + (r * spitch) as u64,
                width,
            )?
        };
    }
    Ok(())
}

/// Copies `src` into `dst` in row-major element order (same element count). Equal dtypes are
/// copied bit for bit; f32 <-> bf16 is converted (round to nearest even) through scratch.
///
/// Either end may lie on another device than the stream's (not both): see the module docs.
///
/// # Safety
/// Both locations must be live device memory (of the stream's context, or of the device they
/// name); the regions must not overlap.
pub unsafe fn copy(cx: &mut CopyCx<'_>, src: &Loc, dst: &Loc) -> Result<()> {
    if src.reg.numel() != dst.reg.numel() {
        return Err(RuntimeError::Schedule(format!(
            "copy of {} elements into {}",
            src.reg.numel(),
            dst.reg.numel()
        )));
    }
    let here = cx.here();
    if !src.is_on(here) || !dst.is_on(here) {
        // SAFETY: per the caller.
        return unsafe { copy_cross(cx, src, dst) };
    }
    if src.dtype != dst.dtype {
        let to_bf16 = match (src.dtype, dst.dtype) {
            (DType::F32, DType::BF16) => true,
            (DType::BF16, DType::F32) => false,
            (a, b) => {
                return Err(RuntimeError::Unsupported(format!(
                    "copy converting {} to {}",
                    a.name(),
                    b.name()
                )))
            }
        };
        let n = src.reg.numel();
        let s = match src.contiguous_ptr() {
            Some(p) => p,
            None => {
                let t = cx.scratch.take(src.bytes())?;
                // SAFETY: per the caller; `t` holds the packed source.
                unsafe { copy(cx, src, &Loc::dense(t, src.dtype, n))? };
                t
            }
        };
        let d = match dst.contiguous_ptr() {
            Some(p) => p,
            None => cx.scratch.take(n * dst.es())?,
        };
        // SAFETY: `s` and `d` hold n elements of the source and destination types.
        unsafe { cx.dk.cast(cx.stream, to_bf16, d, s, n)? };
        if dst.contiguous_ptr().is_none() {
            // SAFETY: `d` holds the converted elements in order.
            unsafe { copy(cx, &Loc::dense(d, dst.dtype, n), dst)? };
        }
        return Ok(());
    }
    let es = src.es();
    match plan_copy(&src.reg, &dst.reg).map_err(RuntimeError::Schedule)? {
        CopyPlan::Empty => Ok(()),
        CopyPlan::Linear {
            src: s,
            dst: d,
            len,
        } => {
            // SAFETY: per the caller.
            unsafe {
                memcpy(
                    cx.stream,
                    dst.base + (d * es) as u64,
                    src.base + (s * es) as u64,
                    len * es,
                )
            }
        }
        CopyPlan::Blocks(pairs) => {
            for (s, d) in &pairs {
                // SAFETY: per the caller; blocks come from the two regions.
                unsafe { copy_block(cx, es, src.base, s, dst.base, d)? };
            }
            Ok(())
        }
        CopyPlan::Staged { src: sb, dst: db } => {
            let t = cx.scratch.take(src.bytes())?;
            let mut at = 0usize;
            for s in &sb {
                let c = Block2D {
                    offset: at,
                    rows: s.rows,
                    cols: s.cols,
                    stride: s.cols,
                };
                // SAFETY: packs into scratch `t`, which holds all elements.
                unsafe { copy_block(cx, es, src.base, s, t, &c)? };
                at += s.numel();
            }
            at = 0;
            for d in &db {
                let c = Block2D {
                    offset: at,
                    rows: d.rows,
                    cols: d.cols,
                    stride: d.cols,
                };
                // SAFETY: unpacks from scratch `t`.
                unsafe { copy_block(cx, es, t, &c, dst.base, d)? };
                at += d.numel();
            }
            Ok(())
        }
    }
}

/// An operand of a combine or patch: its own memory when contiguous, else a packed scratch
/// copy (written back afterwards when it is an output).
pub struct Operand {
    pub ptr: u64,
    pub packed: bool,
}

/// Makes `loc` available contiguously on the stream's device: its own address, or a packed
/// scratch copy (copied in when `read` is set). A location on another device is always
/// copied into local scratch, so kernels never read or write peer memory.
///
/// # Safety
/// `loc` must be live device memory (of the stream's context or the device it names).
pub unsafe fn operand(cx: &mut CopyCx<'_>, loc: &Loc, read: bool) -> Result<Operand> {
    if let (Some(p), true) = (loc.contiguous_ptr(), loc.is_on(cx.here())) {
        return Ok(Operand {
            ptr: p,
            packed: false,
        });
    }
    let t = cx.scratch.take(loc.bytes())?;
    if read {
        // SAFETY: per the caller; `t` has room for the region.
        unsafe { copy(cx, loc, &Loc::dense(t, loc.dtype, loc.reg.numel()))? };
    }
    Ok(Operand {
        ptr: t,
        packed: true,
    })
}

/// Writes a packed operand back to `loc` (no-op when it was not packed).
///
/// # Safety
/// As [`operand`].
pub unsafe fn write_back(cx: &mut CopyCx<'_>, op: &Operand, loc: &Loc) -> Result<()> {
    if op.packed {
        // SAFETY: per the caller.
        unsafe { copy(cx, &Loc::dense(op.ptr, loc.dtype, loc.reg.numel()), loc)? };
    }
    Ok(())
}

/// Fills a region with a 16- or 32-bit pattern (2-D memsets per block).
///
/// # Safety
/// `loc` must be live device memory of the stream's context.
pub unsafe fn fill_pattern(stream: &CudaStream, loc: &Loc, pattern: u32) -> Result<()> {
    let es = loc.es();
    for b in loc.reg.blocks() {
        let p = loc.base + (b.offset * es) as u64;
        if b.rows == 1 || b.stride == b.cols {
            let count = b.rows * b.cols;
            let r = match es {
                // SAFETY: the run lies inside `loc` per the caller.
                4 => unsafe { sys::cuMemsetD32Async(p, pattern, count, stream.cu_stream()) },
                // SAFETY: as above.
                2 => unsafe { sys::cuMemsetD16Async(p, pattern as u16, count, stream.cu_stream()) },
                _ => {
                    return Err(RuntimeError::Unsupported(format!(
                        "pattern fill of {es}-byte elements"
                    )))
                }
            };
            check(r, "cuMemsetD32/D16")?;
            continue;
        }
        let r = match es {
            // SAFETY: the block lies inside `loc` per the caller.
            4 => unsafe {
                sys::cuMemsetD2D32Async(
                    p,
                    b.stride * 4,
                    pattern,
                    b.cols,
                    b.rows,
                    stream.cu_stream(),
                )
            },
            // SAFETY: as above.
            2 => unsafe {
                sys::cuMemsetD2D16Async(
                    p,
                    b.stride * 2,
                    pattern as u16,
                    b.cols,
                    b.rows,
                    stream.cu_stream(),
                )
            },
            _ => {
                return Err(RuntimeError::Unsupported(format!(
                    "pattern fill of {es}-byte elements"
                )))
            }
        };
        check(r, "cuMemsetD2D")?;
    }
    Ok(())
}

/// NaN bit pattern that, repeated as 16-bit words, makes NaN elements of `dtype`.
pub fn nan_pattern16(dtype: DType) -> u16 {
    match dtype {
        DType::F64 => 0x7ff8,
        DType::F32 | DType::BF16 => 0x7fc0,
        DType::F16 => 0x7e00,
    }
}

/// Fills `bytes` bytes (a whole allocation, even length) with NaN for `dtype`.
///
/// # Safety
/// `[ptr, ptr + bytes)` must be device memory of the stream's context.
pub unsafe fn poison(stream: &CudaStream, ptr: u64, bytes: usize, dtype: DType) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: per the caller; `bytes / 2` 16-bit words.
    check(
        unsafe { sys::cuMemsetD16Async(ptr, nan_pattern16(dtype), bytes / 2, stream.cu_stream()) },
        "cuMemsetD16Async (poison)",
    )
}

/// Zeroes `bytes` bytes.
///
/// # Safety
/// `[ptr, ptr + bytes)` must be device memory of the stream's context.
pub unsafe fn zero(stream: &CudaStream, ptr: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: per the caller.
    check(
        unsafe { sys::cuMemsetD8Async(ptr, 0, bytes, stream.cu_stream()) },
        "cuMemsetD8Async",
    )
}

/// Bit pattern of minus infinity for an lse slot of `dtype`.
pub fn neg_inf_pattern(dtype: DType) -> Result<u32> {
    match dtype {
        DType::F32 => Ok(0xff80_0000),
        DType::BF16 => Ok(0xff80),
        DType::F16 => Ok(0xfc00),
        DType::F64 => Err(RuntimeError::Unsupported(
            "NegInf init of an f64 slot (no 64-bit fill)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        // Repeated 16-bit NaN patterns are NaN in every float type.
        let w = nan_pattern16(DType::F64) as u64;
        assert!(f64::from_bits(w << 48 | w << 32 | w << 16 | w).is_nan());
        let w = nan_pattern16(DType::F32) as u32;
        assert!(f32::from_bits(w << 16 | w).is_nan());
        assert!(half::bf16::from_bits(nan_pattern16(DType::BF16)).is_nan());
        assert!(half::f16::from_bits(nan_pattern16(DType::F16)).is_nan());
        assert_eq!(
            f32::from_bits(neg_inf_pattern(DType::F32).unwrap()),
            f32::NEG_INFINITY
        );
        assert_eq!(
            half::bf16::from_bits(neg_inf_pattern(DType::BF16).unwrap() as u16).to_f32(),
            f32::NEG_INFINITY
        );
        assert!(neg_inf_pattern(DType::F64).is_err());
    }

    #[test]
    fn table_locations() {
        let mut t = MemTable {
            ranks: vec![vec![SlotInfo {
                ptr: 0x1000,
                dtype: DType::BF16,
                shape: vec![4, 8],
            }]],
            ..MemTable::default()
        };
        let v = View {
            slot: 0,
            region: Region {
                offset: vec![1, 0],
                extent: vec![2, 8],
            },
        };
        let l = t.loc(0, &v).unwrap();
        assert_eq!(l.contiguous_ptr(), Some(0x1000 + 16));
        assert_eq!(l.bytes(), 32);
        assert!(t.loc(1, &v).is_err());
        assert!(t
            .loc(
                0,
                &View {
                    slot: 0,
                    region: Region {
                        offset: vec![3, 0],
                        extent: vec![2, 8]
                    }
                }
            )
            .is_err());
        // Virtual mode: no device on the location (it lives on the stream's device).
        assert_eq!(l.dev, None);
        assert!(l.is_on(3));
        // Multi-device: the rank's ordinal; other processes' ranks only have metadata.
        t.devs = vec![1];
        let l = t.loc(0, &v).unwrap();
        assert_eq!(l.dev, Some(1));
        assert!(l.is_on(1) && !l.is_on(0));
        t.remote = vec![true];
        assert!(t.loc(0, &v).is_err());
        assert_eq!(t.meta(0, &v).unwrap().bytes(), 32);
    }
}
