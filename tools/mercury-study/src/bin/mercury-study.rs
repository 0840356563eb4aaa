//! `mercury-study`: prints the predicted-latency tables of `docs/simulation.md` (every plan
//! CommIR-generated, except the cross-check against the FIXTURE plans, which says so):
//! `cargo run --release -p mercury-study`. `--no-timing` leaves out the
//! last section (wall times, which vary from run to run). Needs no GPU. Another argument, or
//! `--no-timing` given twice, is a usage error (exit 1).
//!
//! `mercury-study layer [--topology NAME]... [--tokens N]...` prints the graph-level tables of
//! the Llama-3 layer instead (docs/simulation.md, "Graph level: the Llama-3 layer as one
//! module"): by default on the five 8-GPU topologies at 4K, 32K and 128K tokens, and the
//! 2M-token memory frontier.
//!
//! `mercury-study balance [--tokens N]... [--ranks N] [--seeds N]` prints the document
//! balancer's table (docs/perf.md, "Packed documents"): busiest rank / mean attention work of
//! long-tail batches as drawn and as reordered.

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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The Llama-3 layer searched as one module (every kernel's schedule and edge placement
    /// together) against the 3D-parallel configurations, and its 2M-token memory frontier.
    Layer {
        /// A topology preset (repeatable; default: h100-1x8 h100-2x4 h100-4x2 a100-2x4 h200-1x8).
        #[arg(long = "topology", value_name = "NAME")]
        topologies: Vec<String>,
        /// Tokens per sequence (repeatable; default: 4096 32768 131072).
        #[arg(long = "tokens", value_name = "N", value_parser = clap::value_parser!(u64).range(8..))]
        tokens: Vec<u64>,
        /// The joint pick on the one-level mesh only (the products over two mesh levels still
        /// priced as configurations): much faster, as the two-level searches dominate the time.
        #[arg(long)]
        one_level_pick: bool,
    },
    /// The Llama-3-8B layer's memory frontier alone: batch 1 and a batch run as micro-batches
    /// of every size dividing it (each a compiled module), per topology.
    Frontier {
        /// A topology preset (repeatable; default: h100-1x8 h100-2x4 h100-4x2 a100-2x4 h200-1x8).
        #[arg(long = "topology", value_name = "NAME")]
        topologies: Vec<String>,
        /// Tokens per sequence.
        #[arg(long, default_value_t = 1 << 21, value_parser = clap::value_parser!(u64).range(8..))]
        tokens: u64,
        /// The batch of the second row per topology.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
        batch: u64,
    },
    /// The document balancer on long-tail batches of causal documents: busiest rank's work
    /// over the mean as drawn and reordered, contiguous and zigzag shards, and its host time.
    Balance {
        /// Total tokens of a batch (repeatable; default: 32768 131072 524288).
        #[arg(long = "tokens", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        tokens: Vec<u64>,
        /// Ranks holding the sequence's shards.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=4096))]
        ranks: u64,
        /// Batches drawn per row (seeds 0..N).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
        seeds: u64,
    },
}

/// The `--topology` presets given (the layer tables' five when none), or `None` after saying
/// which is not a preset.
fn presets(given: &[String]) -> Option<Vec<&str>> {
    if let Some(bad) = given
        .iter()
        .find(|t| !matches!(mercury_search::Topology::preset(t), Some(Ok(_))))
    {
        eprintln!("mercury-study: error: --topology: no preset '{bad}'");
        return None;
    }
    Some(if given.is_empty() {
        mercury_study::study::layer::LAYER_TOPOLOGIES.to_vec()
    } else {
        given.iter().map(String::as_str).collect()
    })
}

fn main() -> ExitCode {
    // Help and version exit 0, usage errors 1.
    let args: Args = match mercury_driver::cli::parse() {
        Ok(a) => a,
        Err(code) => return code,
    };
    use mercury_study::study::layer;
    let text = match args.command {
        Some(Command::Layer {
            topologies,
            tokens,
            one_level_pick,
        }) => {
            let Some(topologies) = presets(&topologies) else {
                return ExitCode::from(1);
            };
            let tokens: Vec<usize> = if tokens.is_empty() {
                layer::LAYER_TOKENS.to_vec()
            } else {
                tokens.iter().map(|&t| t as usize).collect()
            };
            layer::layer_study(&topologies, &tokens, !one_level_pick)
        }
        Some(Command::Frontier {
            topologies,
            tokens,
            batch,
        }) => {
            let Some(topologies) = presets(&topologies) else {
                return ExitCode::from(1);
            };
            layer::frontier_study(&topologies, tokens as usize, batch as usize)
        }
        Some(Command::Balance {
            tokens,
            ranks,
            seeds,
        }) => {
            let tokens: Vec<usize> = if tokens.is_empty() {
                mercury_study::study::balance::BALANCE_TOKENS.to_vec()
            } else {
                tokens.iter().map(|&t| t as usize).collect()
            };
            mercury_study::study::balance::balance_study(&tokens, ranks as usize, seeds)
        }
        None => mercury_study::study::full_study(!args.no_timing),
    };
    // A standard output closed early (`mercury-study | head`) stops the print quietly.
    let _ = write!(std::io::stdout(), "{text}");
    ExitCode::SUCCESS
}
