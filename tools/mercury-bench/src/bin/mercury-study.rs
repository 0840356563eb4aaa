//! `mercury-study`: prints the predicted-latency tables of `docs/simulation.md` (every plan
//! CommIR-generated, except the cross-check against the FIXTURE plans, which says so):
//! `cargo run --release -p mercury-bench --bin mercury-study`. `--no-timing` leaves out the
//! last section (wall times, which vary from run to run). Needs no GPU.
fn main() {
    let timing = !std::env::args().any(|a| a == "--no-timing");
    print!("{}", mercury_bench::study::full_study(timing));
}
