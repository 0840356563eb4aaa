//! Benchmarks and GPU self-checks of the CUDA backend, kept out of the product libraries:
//! `bench` (the `mercury-gpu-bench` binary: P0 executor self-checks, P1 GEMM, P2/P2c attention
//! patches, P3 RingAttention), `mgpu` (multi-device self-checks) and `links` (link
//! measurements and the topology file they make; both behind the `mercury-mgpu` binary), and
//! `ring` (the hand-written RingAttention plan of P3); `study` (the predicted-latency tables of
//! `docs/simulation.md`, the `mercury-study` binary) and `fixtures` (hand-written attention and
//! GEMM plans the study cross-checks the lowering against).
//! `args` holds what the binaries' clap command lines share (value parsers that refuse a count
//! of 0 or a number out of range, the `--device-kernels-ptx` file read before any GPU).
//! Every GPU test skips with a message where no GPU or library is present.

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
pub mod fixtures;
pub mod links;
pub mod mgpu;
pub mod ring;
pub mod study;

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
