//! CommIR schedule primitives (one pass per file), the dependence analysis they share, and the
//! headline `shift-shard` pipeline.

// Bookkeeping maps keyed by (buffer, tile) read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]

pub mod deps;
pub mod join;
pub mod mesh;
pub mod parallelize;
pub mod print_comm_plan;
pub mod print_memory;
pub mod reorder;
pub mod replicate;
pub mod reshard;
pub mod shard;
pub mod shift;
pub mod shift_shard;
pub mod tile;
pub mod util;

use mercury_ir::pass::PassRegistry;

/// Registers every pass of this crate.
pub fn register_all(registry: &mut PassRegistry) {
    registry.register(&tile::INFO);
    registry.register(&parallelize::INFO);
    registry.register(&shift::INFO);
    registry.register(&shard::INFO);
    registry.register(&replicate::INFO);
    registry.register(&reorder::INFO);
    registry.register(&join::INFO);
    registry.register(&mesh::SINGLE_DEVICE);
    registry.register(&mesh::RESHAPE_MESH);
    registry.register(&reshard::INFO);
    registry.register(&shift_shard::INFO);
    registry.register(&print_comm_plan::INFO);
    registry.register(&print_memory::INFO);
}

/// Turns a schedule script (one pass per line, `#` comments) into a pass pipeline string.
pub fn schedule_pipeline(script: &str) -> String {
    let passes: Vec<&str> = script
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    format!("builtin.module({})", passes.join(","))
}
