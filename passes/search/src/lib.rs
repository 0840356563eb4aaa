//! mercury-search: everything that decides *which* schedule runs.
//!
//! - [`topology`]: machine descriptions (TOML, presets embedded from `topologies/`).
//! - [`memory`]: per-rank bytes of a plan against HBM capacity (pruning).
//! - [`sim`]: the cost model, a discrete-event simulation of a plan on a topology with link
//!   contention, collectives per algorithm and compute/communication overlap; Chrome traces.
//! - [`search`]: the [`search::CandidateSource`] trait (where the CommIR generator plugs
//!   in), evaluation, the latency/memory Pareto frontier and the tuning driver.
//! - [`cache`]: the on-disk schedule cache.
//! - [`commir_source`]: the CommIR generator, the candidate schedules of a CommIR operator.
//! - [`operator`]: operators by shape (`mercury-tune`'s `.toml`), as CommIR from the examples.
//! - [`graph`]: graph-level selection of operator configurations with resharding costs, each
//!   configuration priced by the CommIR generator.
//! - [`report`]: output files of a tuning run (JSON, SVG, Markdown, trace).
//! - [`profile`]: profile-guided search: the model's top K measured through a [`profile::Measure`]
//!   backend (CUDA in `mercury-tune`, the CPU executor in tests), ranking error, suspect cache
//!   entries.
//! - [`templates`]: which known schedule (ring, ulysses, usp, ...) a candidate is.
//!
//! The simulation study and the hand-written FIXTURE plans it cross-checks against are in
//! `tools/mercury-study` (not product code).

pub mod cache;
pub mod commir_source;
pub mod graph;
pub mod layer;
pub mod memory;
pub mod operator;
pub mod profile;
pub mod report;
pub mod search;
pub mod sim;
pub mod templates;
pub mod topology;

pub use search::{Candidate, CandidateSource, SourceError};
pub use topology::Topology;

/// A TOML error in file `origin` (whose text is `text`) as a located diagnostic, `origin:line:col:
/// error: not a valid WHAT: MESSAGE` with the source line and a caret; `Err` with the same
/// words after `origin: ` when the error has no place in the text.
pub(crate) fn toml_diagnostic(
    e: &toml::de::Error,
    origin: &str,
    text: &str,
    what: &str,
) -> Result<mercury_ir::Diagnostic, String> {
    let message = format!("not a valid {what}: {}", e.message().trim_end());
    match e.span() {
        Some(span) => {
            let file = mercury_ir::SourceFile::new(origin, text);
            Ok(mercury_ir::Diagnostic::error(
                file.location(span.start),
                message,
            ))
        }
        None => Err(format!("{origin}: {message}")),
    }
}

/// 64-bit FNV-1a: stable across Rust versions and platforms (used for cache keys and
/// checksums; not a cryptographic hash).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv_known_values() {
        assert_eq!(super::fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn toml_errors_are_located() {
        let text = "name = \"x\"\nsize = [\n";
        let e = toml::from_str::<toml::Value>(text).unwrap_err();
        let d = super::toml_diagnostic(&e, "t.toml", text, "topology file").unwrap();
        let r = d.render();
        assert!(
            r.starts_with("t.toml:3:1: error: not a valid topology file: "),
            "{r}"
        );
        assert!(!r.contains("TOML parse error"), "{r}");
    }
}
