//! GPU patches (feature `cuda`): the cuBLASLt GEMM patch (plus a plain cuBLAS baseline), the
//! NVRTC-compiled attention forward patches (bf16, and f32), and helper kernels for checks and benchmarks.
//!
//! Everything loads CUDA dynamically (cudarc `dynamic-loading`), so this builds on machines
//! without CUDA. Before touching cudarc, call [`probe`] (or rely on the constructors here, which
//! do): a missing library is reported as [`KernelError::LibraryMissing`] instead of cudarc's
//! panic.
//!
//! Memory is passed as raw device pointers (`u64`, `CUdeviceptr`) with explicit element strides:
//! the callers (the plan executor) own allocations and stream ordering.

pub mod alloc;
pub mod attention;
pub mod attention_f32;
pub mod check;
pub mod cudnn;
pub mod error;
pub mod gemm;
pub mod loaded;
pub mod nvrtc;

pub use alloc::{alloc_bytes, set_allocator, DeviceAllocator, DeviceBuffer};
pub use attention::{AttentionPatch, AttnLaunch, AttnVariant, Strided3, ATTENTION_SOURCE};
pub use attention_f32::{validate_f32, AttentionF32Patch, ATTENTION_F32_SOURCE};
pub use check::CheckKernels;
pub use cudarc::driver::CudaContext;
pub use cudnn::{CudnnAttention, SdpaCall, Tensor4};
pub use error::{KernelError, Result};
pub use gemm::{CublasDirect, ElemType, GemmEpilogue, GemmPatch, GemmSpec, GemmWorkspace};
pub use nvrtc::open_context;
pub use nvrtc::{probe, Library};

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles both NVRTC sources for sm_90 where libnvrtc can be loaded (no GPU needed);
    /// skips otherwise. With `MERCURY_DUMP_PTX_DIR` set, writes the PTX there (for `ptxas -v`).
    #[test]
    fn nvrtc_sources_compile_for_sm90() {
        if let Err(e) = probe(Library::Nvrtc) {
            eprintln!("skipping: {e}");
            return;
        }
        for (name, src) in [
            ("attention", attention::ATTENTION_SOURCE),
            ("attention_f32", attention_f32::ATTENTION_F32_SOURCE),
            ("check", check::CHECK_SOURCE),
        ] {
            let ptx = match nvrtc::compile_ptx(src, (9, 0), "test") {
                Ok(p) => p,
                Err(e) => panic!("{name}: {e}"),
            };
            assert!(ptx.contains(".entry"), "{name}: no kernel entry in PTX");
            if name == "attention" {
                assert!(ptx.contains("mma.sync.aligned.m16n8k16"));
                assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans"));
                assert!(ptx.contains("cp.async.cg.shared.global"));
                for v in attention::AttnVariant::ALL {
                    for acc in [false, true] {
                        assert!(ptx.contains(&format!(".entry {}(", v.entry(acc))));
                    }
                }
            }
            if let Ok(dir) = std::env::var("MERCURY_DUMP_PTX_DIR") {
                let path = std::path::Path::new(&dir).join(format!("{name}.ptx"));
                if let Err(e) = std::fs::write(&path, &ptx) {
                    panic!("write {}: {e}", path.display());
                }
            }
        }
    }
}
