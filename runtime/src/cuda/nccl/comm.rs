//! The NCCL library: probing and version, the process environment NCCL must see (NVLink
//! multicast off, see the module docs of `nccl`), and communicator handles.

use crate::cuda::error::{Result, RuntimeError};
use cudarc::nccl::result::NcclError;
use cudarc::nccl::sys as ns;
use std::sync::OnceLock;

/// The variables [`prepare_env`] sets (name, value).
pub const NCCL_ENV: [(&str, &str); 3] = [
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
];

/// Sets [`NCCL_ENV`] in this process (once); returns what it changed, for the log. A variable
/// already set to another value is overridden (NVLink multicast must stay off).
pub fn prepare_env() -> &'static [String] {
    static NOTES: OnceLock<Vec<String>> = OnceLock::new();
    NOTES.get_or_init(|| {
        let mut notes = Vec::new();
        for (k, v) in NCCL_ENV {
            match std::env::var(k) {
                Ok(cur) if cur == v => {}
                Ok(cur) => {
                    notes.push(format!(
                        "{k} was '{cur}'; set to {v} (NVLink multicast stays off)"
                    ));
                    std::env::set_var(k, v);
                }
                Err(_) => {
                    notes.push(format!("{k}={v} set before NCCL initialisation"));
                    std::env::set_var(k, v);
                }
            }
        }
        notes
    })
}

/// Maps an NCCL error to a [`RuntimeError`].
pub fn nccl_err(what: &'static str) -> impl FnOnce(NcclError) -> RuntimeError {
    move |e| RuntimeError::Unsupported(format!("NCCL {what} failed: {:?}", e.0))
}

pub(super) fn check(r: ns::ncclResult_t, what: &'static str) -> Result<()> {
    r.result().map(|_| ()).map_err(nccl_err(what))
}

/// Checks that the NCCL library can be loaded ([`super::lib`]: `MERCURY_NCCL_LIB`, the one
/// this process has loaded already (torch's), `libnccl.so.2`, `libnccl.so`); the error says
/// everywhere it looked.
pub fn probe() -> Result<()> {
    super::lib::load()
        .map(|_| ())
        .map_err(RuntimeError::Unsupported)
}

/// The loaded NCCL's version as (major, minor, patch).
pub fn version() -> Result<(i32, i32, i32)> {
    probe()?;
    prepare_env();
    let v = crate::cuda::nccl::lib::get_nccl_version().map_err(nccl_err("ncclGetVersion"))?;
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
    Ok(if v >= 10000 {
        (v / 10000, (v % 10000) / 100, v % 100)
    } else {
        (v / 1000, (v % 1000) / 100, v % 100)
    })
}

/// One NCCL communicator handle of this process (one rank of it). Aborted on drop (local, never
/// waits for other ranks; the executor has synchronised its devices by then).
#[derive(Debug)]
pub struct Comm {
    raw: ns::ncclComm_t,
    /// This handle's rank in the communicator.
    pub rank: usize,
    /// Ranks in the communicator.
    pub size: usize,
    /// CUDA device of this handle.
    pub ordinal: usize,
}

// SAFETY: an ncclComm_t may be used from any thread as long as calls on it are not concurrent;
// the executor enqueues from one thread at a time (`&mut self`).
unsafe impl Send for Comm {}

impl Drop for Comm {
    fn drop(&mut self) {
        self.abort();
    }
}

/// NCCL's name of `r` and its description (`ncclGetErrorString`).
pub fn result_text(r: ns::ncclResult_t) -> String {
    // SAFETY: ncclGetErrorString returns a static NUL-terminated string (or null).
    let s = unsafe { crate::cuda::nccl::lib::ncclGetErrorString(r) };
    if s.is_null() {
        return format!("{r:?}");
    }
    // SAFETY: non-null, NUL-terminated, static.
    let t = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy();
    format!("{r:?} ({t})")
}

impl Comm {
    /// The raw handle (valid while `self` lives and is not aborted; null after an abort).
    pub fn raw(&self) -> ns::ncclComm_t {
        self.raw
    }

    /// `ncclCommGetAsyncError`: `None` while the communicator is healthy (or still
    /// initialising), else NCCL's error with its last message.
    pub fn async_error(&self) -> Option<String> {
        if self.raw.is_null() {
            return None;
        }
        let mut r = ns::ncclResult_t::ncclSuccess;
        // SAFETY: `raw` is a live handle; `r` is a valid out-pointer.
        let q = unsafe { crate::cuda::nccl::lib::ncclCommGetAsyncError(self.raw, &mut r) };
        if q != ns::ncclResult_t::ncclSuccess {
            return Some(format!("ncclCommGetAsyncError failed: {}", result_text(q)));
        }
        if matches!(
            r,
            ns::ncclResult_t::ncclSuccess | ns::ncclResult_t::ncclInProgress
        ) {
            return None;
        }
        // SAFETY: `raw` is live; the string is owned by NCCL and copied at once.
        let last = unsafe { crate::cuda::nccl::lib::ncclGetLastError(self.raw) };
        let last = if last.is_null() {
            String::new()
        } else {
            // SAFETY: non-null and NUL-terminated.
            let t = unsafe { std::ffi::CStr::from_ptr(last) }.to_string_lossy();
            if t.is_empty() {
                String::new()
            } else {
                format!(": {t}")
            }
        };
        Some(format!("{}{last}", result_text(r)))
    }

    /// `ncclCommAbort`: ends the communicator's work in flight (its kernels stop waiting for
    /// peers) and frees it. Local: never waits for other ranks. Idempotent.
    pub fn abort(&mut self) {
        if self.raw.is_null() {
            return;
        }
        // SAFETY: `raw` came from a successful init or split and is aborted once (nulled).
        let _ = unsafe { crate::cuda::nccl::lib::comm_abort(self.raw) };
        self.raw = std::ptr::null_mut();
    }

    /// One communicator over `ordinals` (distinct devices), rank `i` on `ordinals[i]`
    /// (`ncclCommInitAll`, one process).
    pub fn init_all(ordinals: &[usize]) -> Result<Vec<Comm>> {
        probe()?;
        prepare_env();
        let mut seen = std::collections::BTreeSet::new();
        if ordinals.is_empty() || !ordinals.iter().all(|o| seen.insert(*o)) {
            return Err(RuntimeError::Unsupported(format!(
                "an NCCL communicator needs distinct devices, got {ordinals:?}"
            )));
        }
        let n = ordinals.len();
        let mut raw = vec![std::ptr::null_mut(); n];
        let devs: Vec<i32> = ordinals.iter().map(|o| *o as i32).collect();
        // SAFETY: `raw` and `devs` hold `n` entries each; NCCL writes `n` handles.
        unsafe {
            crate::cuda::nccl::lib::comm_init_all(raw.as_mut_ptr(), n as i32, devs.as_ptr())
                .map_err(nccl_err("ncclCommInitAll"))?;
        }
        Ok(raw
            .into_iter()
            .enumerate()
            .map(|(rank, raw)| Comm {
                raw,
                rank,
                size: n,
                ordinal: ordinals[rank],
            })
            .collect())
    }

    /// Wraps a handle created elsewhere in this crate (init_rank, split).
    pub(crate) fn from_raw(raw: ns::ncclComm_t, rank: usize, size: usize, ordinal: usize) -> Comm {
        Comm {
            raw,
            rank,
            size,
            ordinal,
        }
    }
}
