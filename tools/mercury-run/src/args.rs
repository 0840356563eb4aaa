//! Command-line arguments.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The f64 CPU reference executor (small shapes).
    Cpu,
    /// The GPU (CUDA through cudarc, loaded at run time).
    Cuda,
}

#[derive(Debug, Parser)]
#[command(
    name = "mercury-run",
    version,
    about = "Compile a CommIR operator with a schedule and run it (CPU reference executor or GPUs)"
)]
pub struct Args {
    /// The CommIR file (an operator with its mesh).
    pub input: PathBuf,
    /// A schedule script (one primitive per line, as in examples/schedules).
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// A pass pipeline applied after the schedule script.
    #[arg(long, value_name = "PIPELINE")]
    pub pass_pipeline: Option<String>,
    /// Apply the shift-shard schedule first.
    #[arg(long)]
    pub shift_shard: bool,
    /// The kernel to run when the input has several.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Cuda)]
    pub backend: Backend,
    /// Run every rank on one GPU (each its own memory and streams; transfers are device copies).
    #[arg(long = "virtual")]
    pub virtual_ranks: bool,
    /// Number of ranks expected (checked against the mesh).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Compare with the single-device reference on fresh random inputs.
    #[arg(long)]
    pub check: bool,
    /// Time the schedule and the single-device reference side by side.
    #[arg(long)]
    pub bench: bool,
    /// Timed repetitions (median reported).
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Untimed warm-up runs.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Seed of the random inputs (default: a fresh one every run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Largest relative error `--check` accepts (default: 1e-9 on the CPU, 2e-2 on the GPU).
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// The device kernels' PTX (from `mercury-opt --emit=ptx`) instead of compiling it here.
    #[arg(long, value_name = "FILE")]
    pub device_kernels: Option<PathBuf>,
    /// Write the lowered plan as JSON.
    #[arg(long, value_name = "FILE")]
    pub emit_plan: Option<PathBuf>,
}

pub fn parse() -> Result<Args, clap::Error> {
    let a = Args::try_parse()?;
    if a.iters == 0 {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            "--iters must be at least 1\n",
        ));
    }
    if let Some(t) = a.tolerance {
        if !(t.is_finite() && t > 0.0) {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                "--tolerance must be a positive number\n",
            ));
        }
    }
    Ok(a)
}

impl Args {
    /// The seed of this run's inputs.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
    }
}
