//! `mercury-study`: prints the predicted-latency tables of `docs/simulation.md` (every plan
//! CommIR-generated, except the cross-check against the FIXTURE plans, which says so):
//! `cargo run --release -p mercury-study`. `--no-timing` leaves out the
//! last section (wall times, which vary from run to run). Needs no GPU. Another argument, or
//! `--no-timing` given twice, is a usage error (exit 1).

use clap::Parser;
use std::io::Write as _;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "mercury-study",
    version,
    about = "Print the predicted-latency tables of docs/simulation.md (CPU only)"
)]
struct Args {
    /// Leave out the last section (wall times, which vary from run to run).
    #[arg(long)]
    no_timing: bool,
}

fn main() -> ExitCode {
    // Help and version exit 0, usage errors 1.
    let args: Args = match mercury_driver::cli::parse() {
        Ok(a) => a,
        Err(code) => return code,
    };
    // A standard output closed early (`mercury-study | head`) stops the print quietly.
    let _ = write!(
        std::io::stdout(),
        "{}",
        mercury_study::study::full_study(!args.no_timing)
    );
    ExitCode::SUCCESS
}
