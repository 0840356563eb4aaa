//! Fuzz targets of Mercury-rs (issue 11, items 4 and 8), written as property-based generators
//! over `rand` (the stable toolchain has no libFuzzer; cargo-fuzz needs nightly):
//!
//! - [`parser`]: CommIR texts (the repository's `.mlir` files, byte- and token-level mutations
//!   of them, and structure-aware generation of whole kernels: [`gen`]) through the parser, the
//!   verifier and the printer. Property: nothing panics, every error has a source location,
//!   and what verifies prints to a fixed point (print, parse, print) and reads back the same
//!   from its generic form.
//! - [`schedule`]: random schedules (sequences of the schedule primitives with random options)
//!   on small instances of the example operators ([`operators`]). Property: each step applies
//!   or is refused with a located error, the result lowers or is refused with a located error,
//!   and what lowers computes on the CPU executor what the unscheduled operator computes
//!   (relative error below 1e-9 on fresh random inputs, outputs poisoned with NaN).
//!
//! Both targets are deterministic functions of a `u64` seed, so a failure is reproduced by its
//! seed (`mercury-fuzz --parser-seed S` / `--schedule-seed S`). Regression inputs live in
//! `corpus/` and are replayed by the tests. The short run is part of `cargo test`
//! (`tests/short.rs`); the long run is the `mercury-fuzz` binary (docs/reliability.md).

pub mod gen;
pub mod operators;
pub mod parser;
pub mod schedule;

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

/// The repository root (where `examples/` and `lit/` are).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This crate's regression corpus directory (`corpus/parser`, `corpus/schedules`).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// What one fuzz input found, when it violates a property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Something panicked; the message and its source location.
    Panic(String),
    /// A property other than "no panic" does not hold (an unlocated error, a round trip that
    /// changes the text, a schedule that computes something else).
    Mismatch(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic(m) => write!(f, "panic: {m}"),
            Failure::Mismatch(m) => write!(f, "mismatch: {m}"),
        }
    }
}

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that, inside [`catch`], records the panic's
/// message and location instead of printing it; other panics go to the previous hook.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(|c| c.get()) {
                CAPTURED.with(|c| *c.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into [`Failure::Panic`] with its message and location.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Failure> {
    install_panic_hook();
    let was = CAPTURING.with(|c| c.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    CAPTURING.with(|c| c.set(was));
    r.map_err(|_| {
        Failure::Panic(
            CAPTURED
                .with(|c| c.borrow_mut().take())
                .unwrap_or_else(|| "panic without a message".to_string()),
        )
    })
}

/// Whether a diagnostic and all its notes carry a source location: a place in the parsed
/// buffer, or the file position a location in the IR gives (`loc("f.mlir":3:4)`).
pub fn located(d: &mercury_ir::Diagnostic) -> bool {
    d.loc.line().is_some() && d.notes.iter().all(located)
}

/// Counts of one run of a target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Inputs run.
    pub execs: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// Inputs that violated another property.
    pub mismatches: u64,
    /// Parser: inputs that parsed and verified (their round trip was checked). Schedules:
    /// schedules that lowered and were executed and compared.
    pub checked: u64,
    /// Parser: inputs refused by the parser or the verifier. Schedules: schedules refused by
    /// the lowering (each step's refusals are in `steps_refused`).
    pub refused: u64,
    /// Schedules: primitive steps applied.
    pub steps_applied: u64,
    /// Schedules: primitive steps refused with a located error.
    pub steps_refused: u64,
}

impl Stats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Stats) {
        self.execs += o.execs;
        self.panics += o.panics;
        self.mismatches += o.mismatches;
        self.checked += o.checked;
        self.refused += o.refused;
        self.steps_applied += o.steps_applied;
        self.steps_refused += o.steps_refused;
    }
    /// Counts `failure` (a panic or a mismatch) and returns it as the finding of input `input`
    /// from `seed`.
    pub fn failed(&mut self, seed: u64, input: String, failure: Failure) -> Found {
        match failure {
            Failure::Panic(_) => self.panics += 1,
            Failure::Mismatch(_) => self.mismatches += 1,
        }
        Found {
            seed,
            input,
            failure,
        }
    }
}

/// Runs `f` on a thread with a main-thread sized stack (8 MiB): the parser's nesting bound is
/// sized for it, and a test thread's default 2 MiB would not be representative.
pub fn on_main_sized_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("spawn a fuzz thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// A failing input: its seed, what it was (the text, or the operator and steps) and what
/// failed.
#[derive(Debug, Clone)]
pub struct Found {
    /// The seed that reproduces it.
    pub seed: u64,
    /// The input: a CommIR text, or a schedule case as a `corpus/schedules` file.
    pub input: String,
    /// The violated property.
    pub failure: Failure,
}

/// Runs the parser target on seeds `seeds` (an iterator of seeds), calling `tick` after each
/// input. Returns the counts and the failing inputs.
pub fn run_parser(
    corpus: &[parser::Seed],
    seeds: impl Iterator<Item = u64>,
    mut tick: impl FnMut(),
) -> (Stats, Vec<Found>) {
    let regs = [
        mercury_driver::registry(false),
        mercury_driver::registry(true),
    ];
    let mut stats = Stats::default();
    let mut found = Vec::new();
    for seed in seeds {
        let (text, allow, _) = parser::input(corpus, seed);
        stats.execs += 1;
        match parser::check(&regs[usize::from(allow)], &text) {
            Ok(parser::Verdict::RoundTrips) => stats.checked += 1,
            Ok(parser::Verdict::Refused) => stats.refused += 1,
            Err(failure) => found.push(stats.failed(seed, text, failure)),
        }
        tick();
    }
    (stats, found)
}

/// Runs the schedule target on `seeds`, calling `tick` after each case.
pub fn run_schedules(seeds: impl Iterator<Item = u64>, tick: impl FnMut()) -> (Stats, Vec<Found>) {
    run_schedules_of(seeds, None, tick)
}

/// [`run_schedules`] on operators of `family` only (any family when `None`).
pub fn run_schedules_of(
    seeds: impl Iterator<Item = u64>,
    family: Option<operators::Family>,
    mut tick: impl FnMut(),
) -> (Stats, Vec<Found>) {
    let ctx = schedule::Ctx::default();
    let mut stats = Stats::default();
    let mut found = Vec::new();
    for seed in seeds {
        let (report, r) = schedule::run_seed_of(&ctx, seed, family);
        stats.execs += 1;
        let applied = report.steps.iter().filter(|s| s.1.is_none()).count() as u64;
        stats.steps_applied += applied;
        stats.steps_refused += report.steps.len() as u64 - applied;
        match r {
            Ok(()) if report.error.is_some() => stats.checked += 1,
            Ok(()) => stats.refused += 1,
            Err(failure) => found.push(stats.failed(seed, report.corpus_text(), failure)),
        }
        tick();
    }
    (stats, found)
}
