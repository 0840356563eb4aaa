//! GPU benchmarks and self-checks of the CUDA backend, the ones `scripts/gpu.sh` runs, kept out
//! of the product libraries:
//! - `bench`: the `mercury-gpu-bench` binary. Its sections are registered in one table,
//!   [`bench::SECTIONS`] (P0 executor self-checks, P1 GEMM patch vs cuBLAS, P2 NVRTC and P2c
//!   cuDNN attention patches, P2b the attention backward, P3 RingAttention on virtual ranks);
//!   a new bench is a file under `bench/` with an `impl Bench` method and one line in that
//!   table;
//! - `mgpu` (multi-device self-checks) and `links` (link measurements and the topology file
//!   they make), both behind the `mercury-mgpu` binary;
//! - `ring`: the hand-written RingAttention plan of P3;
//! - `args`: what the binaries' clap command lines share (value parsers that refuse a count of
//!   0 or a number out of range, the `--device-kernels-ptx` file read before any GPU).
//!
//! Every GPU test skips with a message where no GPU or library is present. The one-time
//! simulation study and its FIXTURE plans are in `tools/mercury-study` (CPU only).

// Check closures and row tables read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]

/// `println!` that ignores a standard output closed early (`mercury-mgpu --help | head -2`):
/// `println!` panics there (exit 101) instead of stopping quietly.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a standard output closed early, as [`outln!`].
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

pub mod args;
pub mod bench;
pub mod links;
pub mod mgpu;
pub mod ring;

/// Library warnings (`tracing`: the CUDA executor's) go to stderr: `warn` and above, or the
/// level named in `RUST_LOG` (`error`, `warn`, `info`, `debug`, `trace`).
pub fn init_logging() {
    let level = std::env::var("RUST_LOG").ok().and_then(|l| l.parse().ok());
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .without_time();
    fmt.with_max_level(level.unwrap_or(tracing::Level::WARN))
        .init();
}
