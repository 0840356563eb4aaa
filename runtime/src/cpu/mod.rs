//! The CPU reference executor: runs a plan for every rank with f64 arithmetic, moving exactly
//! the data the plan's transfers and collectives move. Uninitialised slots are poisoned with
//! NaN, so a tile that no transfer delivered shows up in the result.
//!
//! [`Storage`] says what a slot holds: f64 whatever its dtype ([`execute`], the exact data
//! flow), or each value rounded to the slot's dtype where it is stored ([`execute_with`]
//! `Storage::Dtype`, the numbers a device holds), which shows where a plan rounds.
//!
//! One file per concern: `mem.rs` (the ranks' slots, regions, rounding where a value is
//! stored), `compute.rs` (patches, combines, copies, tile ops), `collective.rs` (the
//! collectives, all members at once), `run.rs` (the stage loop: transfers, then compute;
//! outputs as the pieces each rank holds), `inputs.rs` (random inputs, rounding, the errors
//! `--check` reports).

mod collective;
mod compute;
mod documents;
mod inputs;
mod mem;
mod run;
#[cfg(test)]
mod tests;

pub use documents::{documents, random_documents};
pub use inputs::{
    draw_input, random_inputs, relative_error, round_to, rounded_otherwise, rounded_otherwise_in,
};
pub use run::{assemble, execute, execute_pieces, execute_pieces_with, execute_with, HeldPiece};

use mercury_plan::PlanError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    #[error("input '{0}' is missing or has the wrong size")]
    Input(String),
    #[error("document boundaries '{0}': {1}")]
    Documents(String, String),
    #[error("stage {stage}: {what}")]
    Stage { stage: usize, what: String },
}

/// What the executor's slots hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// Every slot holds f64, whatever its dtype: the exact data flow of the plan, the
    /// higher-precision reference a device's result (or a `Dtype` run) is compared with.
    #[default]
    F64,
    /// Every value is rounded to nearest (ties to even) in its slot's dtype wherever it is
    /// stored: a slot's initial load, every compute write (a patch, a combine, a copy, a tile
    /// op), every received message and every collective's landing; an output piece is rounded
    /// to its buffer's dtype as the device's final copy converts it. Arithmetic inside one op
    /// stays f64 (a device sums in f32 or better), so the run holds the numbers a device
    /// stores, and rounding a tile before a later op sums it shows in the result.
    Dtype,
}
