//! Device memory of the patches and the executor: from cudarc (the stream-ordered driver
//! allocator), or, once the process installs one with [`set_allocator`], from an outside
//! allocator, such as PyTorch's caching allocator when Mercury-rs runs inside a PyTorch program
//! (the Python package installs it: then `torch.cuda.memory_allocated` counts the executor's
//! slots and workspaces, and freed blocks go back to torch's pool).
//!
//! Every allocation names the stream that uses it. An outside allocator associates the block
//! with that stream (PyTorch's rule: a freed block is reused by later allocations on the same
//! stream, which are ordered after the work queued on it); memory used by several streams
//! (slots) is only freed once the device has finished with it (the executor synchronizes
//! before it drops).

use super::error::{KernelError, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::sync::{Arc, RwLock};

/// An allocator of device memory outside Mercury-rs.
pub trait DeviceAllocator: Send + Sync {
    /// `bytes` (at least 1) on device `ordinal`, for use by `stream` (a `CUstream` as an
    /// integer): the device address, 256-byte aligned, or why not.
    fn alloc(
        &self,
        ordinal: usize,
        bytes: usize,
        stream: usize,
    ) -> std::result::Result<u64, String>;
    /// Returns `ptr` (from [`DeviceAllocator::alloc`] of device `ordinal`).
    fn free(&self, ordinal: usize, ptr: u64);
}

static ALLOCATOR: RwLock<Option<Arc<dyn DeviceAllocator>>> = RwLock::new(None);

/// Installs `a` as the allocator of every later [`alloc_bytes`] in this process (`None`:
/// cudarc's again). Buffers already allocated go back to the allocator they came from.
pub fn set_allocator(a: Option<Arc<dyn DeviceAllocator>>) {
    if let Ok(mut g) = ALLOCATOR.write() {
        *g = a;
    }
}

fn current() -> Option<Arc<dyn DeviceAllocator>> {
    ALLOCATOR.read().ok().and_then(|g| g.clone())
}

enum Owner {
    /// Freed (stream-ordered) when dropped.
    Cuda { _slice: CudaSlice<u8> },
    Outside {
        allocator: Arc<dyn DeviceAllocator>,
        ordinal: usize,
    },
}

/// Device memory of `len` bytes at `ptr`, returned to where it came from when dropped.
pub struct DeviceBuffer {
    ptr: u64,
    len: usize,
    owner: Owner,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = match self.owner {
            Owner::Cuda { .. } => "cudarc",
            Owner::Outside { .. } => "outside allocator",
        };
        write!(f, "DeviceBuffer({} B at {:#x}, {from})", self.len, self.ptr)
    }
}

impl DeviceBuffer {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no byte (never: allocations are at least 1 byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Owner::Outside { allocator, ordinal } = &self.owner {
            allocator.free(*ordinal, self.ptr);
        }
    }
}

/// `bytes` (at least 1) of uninitialised device memory on `stream`'s device, for use by
/// `stream`: from the installed allocator ([`set_allocator`]), else cudarc's.
///
/// # Safety
/// The contents are uninitialised: the caller writes before it reads.
pub unsafe fn alloc_bytes(
    stream: &Arc<CudaStream>,
    bytes: usize,
    what: &'static str,
) -> Result<DeviceBuffer> {
    let bytes = bytes.max(1);
    if let Some(a) = current() {
        let ordinal = stream.context().ordinal();
        let ptr = a
            .alloc(ordinal, bytes, stream.cu_stream() as usize)
            .map_err(|e| KernelError::Unsupported(format!("{what}: {bytes} B: {e}")))?;
        if ptr % 256 != 0 {
            a.free(ordinal, ptr);
            return Err(KernelError::Unsupported(format!(
                "{what}: the allocator returned {ptr:#x}, not 256-byte aligned"
            )));
        }
        return Ok(DeviceBuffer {
            ptr,
            len: bytes,
            owner: Owner::Outside {
                allocator: a,
                ordinal,
            },
        });
    }
    // SAFETY: per the caller (uninitialised contents are written before they are read).
    let buf = unsafe { stream.alloc::<u8>(bytes) }.map_err(KernelError::driver(what))?;
    let ptr = {
        let (p, _sync) = buf.device_ptr(stream);
        p
    };
    Ok(DeviceBuffer {
        ptr,
        len: bytes,
        owner: Owner::Cuda { _slice: buf },
    })
}
