//! CommIR schedule primitives (one pass per file) and the headline `shift-shard` pipeline; the
//! dependence analysis they share is `mercury_commir::deps`.

// Bookkeeping maps keyed by (buffer, tile) read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]

pub mod balance;
pub mod carry;
pub mod distribute;
pub mod join;
pub mod mesh;
pub mod parallelize;
pub mod patch;
pub mod place_edge;
pub mod reorder;
pub mod replicate;
pub mod reshard;
pub mod reshard_edges;
pub mod shard;
pub mod shift;
pub mod shift_shard;
pub mod tile;
pub mod util;

use mercury_ir::pass::{PassInfo, PassRegistry};

/// Every pass of this crate, in `--list-passes` order of registration.
pub static PASSES: &[&PassInfo] = &[
    &tile::INFO,
    &parallelize::INFO,
    &shift::INFO,
    &carry::INFO,
    &shard::INFO,
    &replicate::INFO,
    &reorder::INFO,
    &join::INFO,
    &distribute::INFO,
    &mesh::SINGLE_DEVICE,
    &mesh::RESHAPE_MESH,
    &reshard::INFO,
    &reshard_edges::INFO,
    &place_edge::INFO,
    &shift_shard::INFO,
    &balance::INFO,
    &patch::INFO,
];

/// Registers every pass of this crate.
pub fn register_all(registry: &mut PassRegistry) {
    for p in PASSES {
        registry.register(p);
    }
}

/// Turns a schedule script (one pass per line, `#` comments: see
/// [`mercury_ir::pass::parse_schedule`]) into a pass pipeline string.
pub fn schedule_pipeline(script: &str) -> String {
    let script = script.strip_prefix('\u{feff}').unwrap_or(script);
    let passes: Vec<&str> = script
        .lines()
        .map(|l| l[..mercury_ir::pass::schedule_comment_start(l).unwrap_or(l.len())].trim())
        .filter(|l| !l.is_empty())
        .collect();
    format!("builtin.module({})", passes.join(","))
}
