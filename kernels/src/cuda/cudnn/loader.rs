//! Finding and loading cuDNN, and the handful of entry points the attention patch calls.
//!
//! cudarc's own loader tries `libcudnn.so` first, which on the GPU image resolves to a system
//! cuDNN 9.14 even when PyTorch's 9.19 is what the user runs (`cudnn-sdpa-notes.md`, section 5),
//! and it cannot be pointed elsewhere. So the library is opened here, by absolute path where
//! one is known, and only cudarc's types and enum values are used. Search order:
//!
//! 1. `MERCURY_CUDNN_LIB`: a file, or a directory holding `libcudnn.so.9` / `libcudnn.so`
//!    (when set and unusable, nothing else is tried);
//! 2. the `libcudnn.so*` this process has loaded already (`/proc/self/maps`): inside a
//!    PyTorch program, the cuDNN torch uses;
//! 3. the dynamic loader's usual search: `libcudnn.so.9`, then `libcudnn.so`;
//! 4. only when all of those fail: the `nvidia-cudnn` Python package's `lib` folder
//!    (`python3 -c 'import nvidia.cudnn'`, a child process), which is where PyTorch's cuDNN
//!    lives.
//!
//! A candidate is taken when it loads, exports every entry point below and reports a version
//! of at least [`MIN_VERSION`]. Opening the dispatcher by absolute path makes its `$ORIGIN`
//! RUNPATH find the sub-libraries (graph, engines, heuristics) of the same release beside it.

use libloading::Library;
use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Oldest cuDNN the patch accepts (9.0.0): fused attention with statistics through the
/// composite graph. The unified SDPA operation needs [`UNIFIED_SDPA_VERSION`].
pub const MIN_VERSION: usize = 90000;
/// First cuDNN with the unified SDPA forward operation (9.13.1).
pub const UNIFIED_SDPA_VERSION: usize = 91301;

type CreateDesc = unsafe extern "C" fn(u32, *mut *mut c_void) -> u32;
type DestroyDesc = unsafe extern "C" fn(*mut c_void) -> u32;
type SetAttr = unsafe extern "C" fn(*mut c_void, u32, u32, i64, *const c_void) -> u32;
type GetAttr = unsafe extern "C" fn(*mut c_void, u32, u32, i64, *mut i64, *mut c_void) -> u32;
type Finalize = unsafe extern "C" fn(*mut c_void) -> u32;
type Execute = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> u32;
type Create = unsafe extern "C" fn(*mut *mut c_void) -> u32;
type Destroy = unsafe extern "C" fn(*mut c_void) -> u32;
type SetStream = unsafe extern "C" fn(*mut c_void, *mut c_void) -> u32;
type GetVersion = unsafe extern "C" fn() -> usize;
type GetErrorString = unsafe extern "C" fn(u32) -> *const c_char;
type GetLastErrorString = unsafe extern "C" fn(*mut c_char, usize);

/// The loaded library and its entry points. Statuses are read as plain `u32`
/// (`cudnnStatus_t` values), so a code this build does not know cannot be undefined behaviour.
pub struct CudnnLib {
    _lib: Library,
    /// Where it was loaded from (a path, or the soname the loader resolved).
    pub origin: String,
    /// `cudnnGetVersion()`, e.g. 91900 for 9.19.0.
    pub version: usize,
    pub(crate) create_descriptor: CreateDesc,
    pub(crate) destroy_descriptor: DestroyDesc,
    pub(crate) set_attribute: SetAttr,
    pub(crate) get_attribute: GetAttr,
    pub(crate) finalize: Finalize,
    pub(crate) execute: Execute,
    pub(crate) create: Create,
    pub(crate) destroy: Destroy,
    pub(crate) set_stream: SetStream,
    get_error_string: GetErrorString,
    get_last_error_string: Option<GetLastErrorString>,
}

impl std::fmt::Debug for CudnnLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuDNN {} ({})",
            version_string(self.version),
            self.origin
        )
    }
}

/// `91900` -> `"9.19.0"`.
pub fn version_string(v: usize) -> String {
    format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
}

impl CudnnLib {
    /// The error string of a status, plus the library's last error message when it has one.
    pub fn describe(&self, status: u32) -> String {
        // SAFETY: cudnnGetErrorString takes any status value and returns a static C string
        // (or null, handled).
        let name = unsafe {
            let p = (self.get_error_string)(status);
            if p.is_null() {
                format!("status {status}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let mut last = String::new();
        if let Some(f) = self.get_last_error_string {
            let mut buf = vec![0 as c_char; 1024];
            // SAFETY: the buffer is writable for its whole length, which is passed as the
            // maximum size; cuDNN writes a NUL-terminated string into it.
            unsafe { f(buf.as_mut_ptr(), buf.len()) };
            buf[1023] = 0;
            // SAFETY: NUL-terminated (forced above), and lives until the end of this block.
            last = unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .trim()
                .to_string();
        }
        if last.is_empty() {
            format!("{name} ({status})")
        } else {
            format!("{name} ({status}): {last}")
        }
    }

    /// Opens one candidate: its entry points and version.
    fn open(path: &Path) -> Result<CudnnLib, String> {
        // SAFETY: loading cuDNN runs its initialisers, which have no preconditions.
        let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has this C signature in every cuDNN 9 header (cudnn_graph.h,
                // cudnn_ops.h); statuses are returned as the enum's underlying 32-bit integer.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?
            };
        }
        let get_version: GetVersion = sym!("cudnnGetVersion");
        let last: Option<GetLastErrorString> = {
            // SAFETY: as in `sym!`; cudnnGetLastErrorString exists from 9.0 on.
            unsafe { lib.get::<GetLastErrorString>(b"cudnnGetLastErrorString\0") }
                .ok()
                .map(|s| *s)
        };
        let out = CudnnLib {
            create_descriptor: sym!("cudnnBackendCreateDescriptor"),
            destroy_descriptor: sym!("cudnnBackendDestroyDescriptor"),
            set_attribute: sym!("cudnnBackendSetAttribute"),
            get_attribute: sym!("cudnnBackendGetAttribute"),
            finalize: sym!("cudnnBackendFinalize"),
            execute: sym!("cudnnBackendExecute"),
            create: sym!("cudnnCreate"),
            destroy: sym!("cudnnDestroy"),
            set_stream: sym!("cudnnSetStream"),
            get_error_string: sym!("cudnnGetErrorString"),
            get_last_error_string: last,
            // SAFETY: cudnnGetVersion takes no arguments and only returns a constant.
            version: unsafe { get_version() },
            origin: path.display().to_string(),
            _lib: lib,
        };
        if out.version < MIN_VERSION {
            return Err(format!(
                "version {} is older than {}",
                version_string(out.version),
                version_string(MIN_VERSION)
            ));
        }
        Ok(out)
    }
}

/// The candidates of the search order in the module docs but the last (the Python package,
/// which takes a child process), with where each came from.
pub fn candidates() -> Vec<(PathBuf, &'static str)> {
    crate::cuda::loaded::candidates(
        "MERCURY_CUDNN_LIB",
        "libcudnn.so",
        &["libcudnn.so.9", "libcudnn.so"],
    )
}

/// The `lib` folder of the `nvidia-cudnn` Python package, if `python3` finds one.
fn python_cudnn_dir() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dir.is_dir().then_some(dir)
}

/// Loads cuDNN once per process (see the module docs for the search order). The error lists
/// every place tried and why each was refused.
pub fn load() -> Result<&'static CudnnLib, String> {
    static LIB: OnceLock<Result<CudnnLib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut tried = Vec::new();
        let env_set = std::env::var_os("MERCURY_CUDNN_LIB").is_some();
        // The Python package's folder is asked for (a child process) only when the others
        // fail and MERCURY_CUDNN_LIB is not set.
        let python = std::iter::once_with(|| (!env_set).then(python_cudnn_dir).flatten())
            .flatten()
            .map(|d| (d.join("libcudnn.so.9"), "the nvidia-cudnn Python package"));
        for (path, from) in candidates().into_iter().chain(python) {
            match CudnnLib::open(&path) {
                Ok(lib) => {
                    tracing::info!(
                        "cuDNN {} loaded from {} ({from})",
                        version_string(lib.version),
                        lib.origin
                    );
                    return Ok(lib);
                }
                Err(e) => tried.push(format!("{} ({from}): {e}", path.display())),
            }
        }
        Err(format!("no usable cuDNN; tried: {}", tried.join("; ")))
    })
    .as_ref()
    .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_print_as_releases() {
        assert_eq!(version_string(91900), "9.19.0");
        assert_eq!(version_string(91301), "9.13.1");
    }

    #[test]
    fn search_order_starts_with_the_loader_names() {
        // Without MERCURY_CUDNN_LIB and with no cuDNN in this process, the loader's names come
        // first, versioned name first, and nothing else (no child process).
        if std::env::var_os("MERCURY_CUDNN_LIB").is_none()
            && crate::cuda::loaded::loaded_library("libcudnn.so").is_none()
        {
            let c = candidates();
            assert_eq!(c.len(), 2);
            assert_eq!(c[0].0, PathBuf::from("libcudnn.so.9"));
            assert_eq!(c[1].0, PathBuf::from("libcudnn.so"));
        }
    }
}
