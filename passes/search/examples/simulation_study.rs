//! Prints the predicted-latency tables of `docs/simulation.md` (FIXTURE plans):
//! `cargo run --release -p mercury-search --example simulation_study`.
fn main() {
    print!("{}", mercury_search::study::full_study());
}
