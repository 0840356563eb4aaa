//! `mercury-study`: prints the predicted-latency tables of `docs/simulation.md` (every plan
//! CommIR-generated, except the cross-check against the FIXTURE plans, which says so):
//! `cargo run --release -p mercury-bench --bin mercury-study`. `--no-timing` leaves out the
//! last section (wall times, which vary from run to run). Needs no GPU. Another argument, or
//! `--no-timing` given twice, is a usage error (exit 1).

use std::process::ExitCode;

const USAGE: &str = "usage: mercury-study [--no-timing]";

fn main() -> ExitCode {
    let mut timing = true;
    let mut it = mercury_bench::args::Flags::new(std::env::args().skip(1), USAGE);
    while let Some(a) = it.next_flag() {
        match a.as_str() {
            "--no-timing" => {
                if let Err(e) = it.switch(&a) {
                    return mercury_driver::cli::usage_error("mercury-study", &e);
                }
                timing = false;
            }
            "-h" | "--help" => {
                mercury_bench::outln!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                return mercury_driver::cli::usage_error(
                    "mercury-study",
                    &format!("unknown argument {other}\n{USAGE}"),
                )
            }
        }
    }
    mercury_bench::out!("{}", mercury_bench::study::full_study(timing));
    ExitCode::SUCCESS
}
