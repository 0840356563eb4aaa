//! The NCCL library and the entry points Mercury-rs calls, opened here rather than through
//! cudarc's loader, which never tries `libnccl.so.2` (the name NCCL's packages and PyTorch
//! ship) and cannot be pointed at a file. Inside a PyTorch program the NCCL torch loaded must
//! be the one used: two NCCLs in one process keep separate state (their communicators,
//! proxies and bootstrap threads know nothing of each other). Search order:
//!
//! 1. `MERCURY_NCCL_LIB`: a file, or a directory holding `libnccl.so.2` / `libnccl.so` (when
//!    set and unusable, nothing else is tried);
//! 2. the `libnccl.so*` this process has loaded already (`/proc/self/maps`): torch's;
//! 3. the dynamic loader's search: `libnccl.so.2`, then `libnccl.so`.
//!
//! Only cudarc's types (`cudarc::nccl::sys`) are used; every call goes through the functions
//! below, which answer `ncclSystemError` (or a null string) when no library could be loaded
//! (callers check [`super::probe`] first, which reports where it looked).

#![allow(non_snake_case)]

use cudarc::nccl::result::NcclError;
use cudarc::nccl::sys::{
    cudaStream_t, ncclComm_t, ncclConfig_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

/// What an entry point answers when the library is missing.
trait Missing {
    fn missing() -> Self;
}

impl Missing for ncclResult_t {
    fn missing() -> Self {
        ncclResult_t::ncclSystemError
    }
}

impl Missing for *const c_char {
    fn missing() -> Self {
        std::ptr::null()
    }
}

macro_rules! entry_points {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        /// The loaded library and its entry points.
        pub struct NcclLib {
            _lib: Library,
            /// Where it was loaded from.
            pub origin: String,
            $($name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        impl NcclLib {
            fn open(path: &std::path::Path) -> Result<NcclLib, String> {
                // SAFETY: loading NCCL runs its initialisers, which have no preconditions.
                let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
                $(
                    // SAFETY: the symbol has this C signature in every NCCL 2.x header
                    // (nccl.h; cudarc's bindings are generated from it).
                    let $name = *unsafe {
                        lib.get::<unsafe extern "C" fn($($ty),*) -> $ret>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                    }
                    .map_err(|e| format!("{}: {e}", stringify!($name)))?;
                )*
                Ok(NcclLib {
                    _lib: lib,
                    origin: path.display().to_string(),
                    $($name,)*
                })
            }
        }

        $(
            /// The NCCL entry point of this name (see nccl.h), from the library [`load`]
            /// found; `ncclSystemError` (or null) when none could be loaded.
            ///
            /// # Safety
            /// As NCCL's function of this name: live handles, valid pointers and counts.
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                match load() {
                    // SAFETY: per the caller.
                    Ok(l) => unsafe { (l.$name)($($arg),*) },
                    Err(_) => <$ret as Missing>::missing(),
                }
            }
        )*
    };
}

entry_points! {
    ncclGetVersion(version: *mut c_int) -> ncclResult_t;
    ncclGetUniqueId(id: *mut ncclUniqueId) -> ncclResult_t;
    ncclCommInitRank(comm: *mut ncclComm_t, nranks: c_int, id: ncclUniqueId, rank: c_int) -> ncclResult_t;
    ncclCommInitAll(comm: *mut ncclComm_t, ndev: c_int, devlist: *const c_int) -> ncclResult_t;
    ncclCommSplit(comm: ncclComm_t, color: c_int, key: c_int, newcomm: *mut ncclComm_t, config: *mut ncclConfig_t) -> ncclResult_t;
    ncclCommAbort(comm: ncclComm_t) -> ncclResult_t;
    ncclCommGetAsyncError(comm: ncclComm_t, error: *mut ncclResult_t) -> ncclResult_t;
    ncclGetErrorString(result: ncclResult_t) -> *const c_char;
    ncclGetLastError(comm: ncclComm_t) -> *const c_char;
    ncclGroupStart() -> ncclResult_t;
    ncclGroupEnd() -> ncclResult_t;
    ncclSend(buf: *const c_void, count: usize, dt: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclRecv(buf: *mut c_void, count: usize, dt: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclAllReduce(send: *const c_void, recv: *mut c_void, count: usize, dt: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclAllGather(send: *const c_void, recv: *mut c_void, count: usize, dt: ncclDataType_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclReduceScatter(send: *const c_void, recv: *mut c_void, count: usize, dt: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclReduce(send: *const c_void, recv: *mut c_void, count: usize, dt: ncclDataType_t, op: ncclRedOp_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    ncclBroadcast(send: *const c_void, recv: *mut c_void, count: usize, dt: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
}

/// The candidates of the search order in the module docs, with where each came from.
pub fn candidates() -> Vec<(PathBuf, &'static str)> {
    mercury_kernels::cuda::loaded::candidates(
        "MERCURY_NCCL_LIB",
        "libnccl.so",
        &["libnccl.so.2", "libnccl.so"],
    )
}

/// Loads NCCL once per process (the search order in the module docs); the error lists every
/// place tried and why each was refused.
pub fn load() -> Result<&'static NcclLib, String> {
    static LIB: OnceLock<Result<NcclLib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut tried = Vec::new();
        for (path, from) in candidates() {
            match NcclLib::open(&path) {
                Ok(lib) => {
                    tracing::info!("NCCL loaded from {} ({from})", lib.origin);
                    return Ok(lib);
                }
                Err(e) => tried.push(format!("{} ({from}): {e}", path.display())),
            }
        }
        Err(format!(
            "no usable NCCL library; tried: {}. Set MERCURY_NCCL_LIB to libnccl.so.2 (PyTorch's is in the nvidia-nccl package's lib folder)",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn ok(r: ncclResult_t) -> Result<(), NcclError> {
    r.result().map(|_| ()).map_err(|_| NcclError(r))
}

/// `ncclGetUniqueId`.
pub fn get_uniqueid() -> Result<ncclUniqueId, NcclError> {
    let mut id = ncclUniqueId { internal: [0; 128] };
    // SAFETY: `id` is a valid out-pointer.
    ok(unsafe { ncclGetUniqueId(&mut id) })?;
    Ok(id)
}

/// `ncclGetVersion`.
pub fn get_nccl_version() -> Result<i32, NcclError> {
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid out-pointer.
    ok(unsafe { ncclGetVersion(&mut v) })?;
    Ok(v)
}

/// `ncclGroupStart`.
pub fn group_start() -> Result<(), NcclError> {
    // SAFETY: no arguments; NCCL tracks groups per thread.
    ok(unsafe { ncclGroupStart() })
}

/// `ncclGroupEnd`.
pub fn group_end() -> Result<(), NcclError> {
    // SAFETY: no arguments; NCCL tracks groups per thread.
    ok(unsafe { ncclGroupEnd() })
}

/// `ncclCommInitRank`.
///
/// # Safety
/// `comm` must be a valid out-pointer; every rank passes the same id.
pub unsafe fn comm_init_rank(
    comm: *mut ncclComm_t,
    nranks: i32,
    id: ncclUniqueId,
    rank: i32,
) -> Result<(), NcclError> {
    // SAFETY: per the caller.
    ok(unsafe { ncclCommInitRank(comm, nranks, id, rank) })
}

/// `ncclCommInitAll`.
///
/// # Safety
/// `comm` and `devs` must hold `ndev` entries.
pub unsafe fn comm_init_all(
    comm: *mut ncclComm_t,
    ndev: i32,
    devs: *const c_int,
) -> Result<(), NcclError> {
    // SAFETY: per the caller.
    ok(unsafe { ncclCommInitAll(comm, ndev, devs) })
}

/// `ncclCommAbort`.
///
/// # Safety
/// `comm` must be a live handle, aborted once.
pub unsafe fn comm_abort(comm: ncclComm_t) -> Result<(), NcclError> {
    // SAFETY: per the caller.
    ok(unsafe { ncclCommAbort(comm) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_names_the_versioned_library_first() {
        if std::env::var_os("MERCURY_NCCL_LIB").is_none()
            && mercury_kernels::cuda::loaded::loaded_library("libnccl.so").is_none()
        {
            let c = candidates();
            assert_eq!(c[0].0, PathBuf::from("libnccl.so.2"));
            assert_eq!(c[1].0, PathBuf::from("libnccl.so"));
        }
    }

    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        if load().is_err() {
            assert_eq!(
                get_uniqueid().map_err(|e| e.0),
                Err(ncclResult_t::ncclSystemError)
            );
            // SAFETY: no library: the wrapper answers without calling anything.
            assert!(unsafe { ncclGetErrorString(ncclResult_t::ncclSuccess) }.is_null());
        }
    }
}
