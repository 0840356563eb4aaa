//! Prints the predicted-latency tables of `docs/simulation.md` (CommIR-generated plans, except
//! the graph-level table and the cross-check, which say so):
//! `cargo run --release -p mercury-search --example simulation_study`.
//! `--no-timing` leaves out the last section (wall times, which vary from run to run).
fn main() {
    let timing = !std::env::args().any(|a| a == "--no-timing");
    print!("{}", mercury_search::study::full_study(timing));
}
