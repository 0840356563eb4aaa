//! Library probing and NVRTC compilation of the crate's CUDA C++ sources.

use super::error::{KernelError, Result};
use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::{CompileError, CompileOptions};
use std::sync::{Arc, OnceLock};

/// The CUDA libraries this crate loads at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// `libcuda` (the driver).
    Driver,
    /// `libnvrtc` (run-time compilation).
    Nvrtc,
    /// `libcublas`.
    Cublas,
    /// `libcublasLt`.
    CublasLt,
}

impl Library {
    fn name(self) -> &'static str {
        match self {
            Library::Driver => "libcuda",
            Library::Nvrtc => "libnvrtc",
            Library::Cublas => "libcublas",
            Library::CublasLt => "libcublasLt",
        }
    }
}

/// Checks that `lib` can be loaded, without calling into it. cudarc panics when a dynamically
/// loaded library is missing; every constructor of this crate calls this first, so that a
/// machine without CUDA gets [`KernelError::LibraryMissing`] instead.
pub fn probe(lib: Library) -> Result<()> {
    static CACHE: [OnceLock<bool>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let slot = match lib {
        Library::Driver => &CACHE[0],
        Library::Nvrtc => &CACHE[1],
        Library::Cublas => &CACHE[2],
        Library::CublasLt => &CACHE[3],
    };
    let present = *slot.get_or_init(|| {
        // SAFETY: each `is_culib_present` only tries `dlopen` on candidate library names and
        // drops what it opened; it calls no function of the library.
        unsafe {
            match lib {
                Library::Driver => cudarc::driver::sys::is_culib_present(),
                Library::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
                Library::Cublas => cudarc::cublas::sys::is_culib_present(),
                Library::CublasLt => cudarc::cublaslt::sys::is_culib_present(),
            }
        }
    });
    if present {
        Ok(())
    } else {
        Err(KernelError::LibraryMissing {
            lib: lib.name(),
            hint: match lib {
                Library::Driver => "no NVIDIA driver on this machine?",
                _ => "put the CUDA toolkit's lib64 on LD_LIBRARY_PATH",
            },
        })
    }
}

/// Opens a context on device `ordinal` after probing the driver library.
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    probe(Library::Driver)?;
    CudaContext::new(ordinal).map_err(KernelError::driver("cuCtx (open device)"))
}

/// NVRTC options for a device of compute capability `cc`: PTX for the virtual architecture
/// `compute_XY` (the driver JIT-compiles it for the real chip when the module loads).
pub fn compile_options(cc: (i32, i32)) -> Vec<String> {
    vec![
        format!("--gpu-architecture=compute_{}{}", cc.0, cc.1),
        "--std=c++17".to_string(),
    ]
}

/// Compiles `src` to PTX with NVRTC for compute capability `cc`, without loading it.
pub fn compile_ptx(src: &str, cc: (i32, i32), what: &'static str) -> Result<String> {
    probe(Library::Nvrtc)?;
    if src.contains('\0') {
        return Err(KernelError::Invalid(format!("{what}: source contains NUL")));
    }
    let opts = CompileOptions {
        options: compile_options(cc),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| KernelError::Nvrtc {
        what,
        msg: match e {
            CompileError::CompileError { nvrtc, log, .. } => {
                format!("{nvrtc:?}: {}", log.to_string_lossy())
            }
            other => format!("{other:?}"),
        },
    })?;
    Ok(ptx.to_src())
}

/// Compiles `src` for the device of `ctx` (compute capability 8.0 or newer) and loads it.
pub fn compile_and_load(
    ctx: &Arc<CudaContext>,
    src: &str,
    what: &'static str,
) -> Result<Arc<CudaModule>> {
    let cc = ctx
        .compute_capability()
        .map_err(KernelError::driver("compute capability"))?;
    if cc.0 < 8 {
        return Err(KernelError::Unsupported(format!(
            "{what} needs compute capability 8.0+ (bf16 mma.sync); device has {}.{}",
            cc.0, cc.1
        )));
    }
    let ptx = compile_ptx(src, cc, what)?;
    ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx))
        .map_err(KernelError::driver("cuModuleLoadData (NVRTC output)"))
}
