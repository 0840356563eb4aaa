//! `mercury-fuzz`: the long fuzz run (docs/reliability.md).
//!
//! ```sh
//! cargo run --release -p mercury-fuzz --bin mercury-fuzz -- \
//!     --parser 10000000 --schedules 100000 --threads 2
//! ```
//!
//! Runs the parser target on `--parser` inputs and the schedule target on `--schedules` cases,
//! split over `--threads` threads, with a progress bar each; prints execs, panics and
//! mismatches per target and the first failures with their seeds; exits 1 when anything
//! failed. `--parser-seed S` / `--schedule-seed S` rerun one input and print it in full;
//! `--save DIR` writes every failing input there (for `corpus/`).

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mercury_fuzz::{
    on_main_sized_stack, parser, run_parser, run_schedules, schedule, Found, Stats,
};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Parser, Debug)]
#[command(
    name = "mercury-fuzz",
    version,
    about = "Fuzz the CommIR parser/verifier/printer and random schedules through the lowering and the CPU executor"
)]
struct Args {
    /// Parser inputs to run.
    #[arg(long, default_value_t = 100_000)]
    parser: u64,
    /// Schedule cases to run.
    #[arg(long, default_value_t = 1_000)]
    schedules: u64,
    /// Worker threads per target (at least 1).
    #[arg(long, default_value_t = 2)]
    threads: u64,
    /// First seed (inputs use seed, seed + 1, ...); default: from the clock, printed.
    #[arg(long)]
    seed: Option<u64>,
    /// Rerun the parser input of this seed and print it.
    #[arg(long)]
    parser_seed: Option<u64>,
    /// Rerun the schedule case of this seed and print it.
    #[arg(long)]
    schedule_seed: Option<u64>,
    /// Write failing inputs into this directory.
    #[arg(long)]
    save: Option<std::path::PathBuf>,
    /// Stop each target after this many seconds and report what ran (0: no limit).
    #[arg(long, default_value_t = 0)]
    max_seconds: u64,
    /// No progress bars (for logs).
    #[arg(long)]
    quiet: bool,
}

fn bar(multi: &MultiProgress, len: u64, name: &str, quiet: bool) -> ProgressBar {
    if quiet || len == 0 {
        return ProgressBar::hidden();
    }
    let b = multi.add(ProgressBar::new(len));
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{name:>9} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} ({{per_sec}}, eta {{eta}})"
        ))
        .expect("progress template"),
    );
    b
}

/// Runs `work(first, count, tick)` on `threads` threads (at least 1) over `0..total` in
/// interleaved strides, summing stats.
fn spread(
    total: u64,
    threads: u64,
    base: u64,
    deadline: Option<Instant>,
    pb: &ProgressBar,
    work: impl Fn(Box<dyn Iterator<Item = u64> + Send>, &dyn Fn()) -> (Stats, Vec<Found>)
        + Send
        + Sync
        + 'static,
) -> (Stats, Vec<Found>) {
    let work = Arc::new(work);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let work = work.clone();
            let pb = pb.clone();
            let step = threads;
            std::thread::Builder::new()
                .stack_size(8 << 20)
                .spawn(move || {
                    let seeds = (t..total)
                        .step_by(step as usize)
                        .map(move |i| base.wrapping_add(i))
                        .take_while(move |_| deadline.is_none_or(|d| Instant::now() < d));
                    let ticks = std::cell::Cell::new(0u64);
                    let tick = || {
                        ticks.set(ticks.get() + 1);
                        if ticks.get().is_multiple_of(64) {
                            pb.inc(64);
                        }
                    };
                    let r = work(Box::new(seeds), &tick);
                    pb.inc(ticks.get() % 64);
                    r
                })
                .expect("spawn a fuzz thread")
        })
        .collect();
    let mut stats = Stats::default();
    let mut found = Vec::new();
    for h in handles {
        let (s, f) = h.join().expect("a fuzz thread died");
        stats.add(&s);
        found.extend(f);
    }
    found.sort_by_key(|f| f.seed);
    (stats, found)
}

fn report(target: &str, stats: &Stats, found: &[Found], secs: f64, save: Option<&std::path::Path>) {
    println!(
        "{target}: execs {}, panics {}, mismatches {} ({} checked, {} refused{}) in {secs:.0} s",
        stats.execs,
        stats.panics,
        stats.mismatches,
        stats.checked,
        stats.refused,
        if target == "schedules" {
            format!(
                "; steps {} applied, {} refused",
                stats.steps_applied, stats.steps_refused
            )
        } else {
            String::new()
        }
    );
    for f in found.iter().take(5) {
        println!("  seed {}: {}", f.seed, first_line(&f.failure.to_string()));
    }
    if let Some(dir) = save {
        for f in found {
            let path = dir.join(format!("{target}-{}.mlir", f.seed));
            if let Err(e) = std::fs::write(&path, &f.input) {
                eprintln!(
                    "mercury-fuzz: error: cannot write '{}': {e}",
                    path.display()
                );
            }
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().take(3).collect::<Vec<_>>().join(" | ")
}

fn main() -> ExitCode {
    let args: Args = match mercury_driver::cli::parse() {
        Ok(a) => a,
        Err(code) => return code,
    };
    // A count of 0 is refused, as the other tools refuse theirs (it ran on as "0 threads").
    if args.threads == 0 {
        return mercury_driver::cli::usage_error(
            "mercury-fuzz",
            "--threads must be at least 1 (worker threads per target)",
        );
    }
    // The --save directory before anything runs: a bad one is a usage error, not a panic.
    if let Some(dir) = &args.save {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return mercury_driver::cli::usage_error(
                "mercury-fuzz",
                &format!(
                    "cannot create the --save directory '{}': {e}",
                    dir.display()
                ),
            );
        }
    }
    mercury_fuzz::install_panic_hook();
    if let Some(seed) = args.parser_seed {
        let corpus = parser::seeds();
        let (text, allow, origin) = parser::input(&corpus, seed);
        println!("// parser seed {seed} ({origin:?}, unregistered ops allowed: {allow})\n{text}");
        let reg = mercury_driver::registry(allow);
        let r = on_main_sized_stack(move || parser::check(&reg, &text));
        println!("// result: {r:?}");
        return ExitCode::from(u8::from(r.is_err()));
    }
    if let Some(seed) = args.schedule_seed {
        let (rep, r) = on_main_sized_stack(move || {
            let ctx = schedule::Ctx::default();
            schedule::run_seed(&ctx, seed)
        });
        println!("{}", rep.corpus_text());
        for (s, e) in &rep.steps {
            println!("// {s}: {}", e.as_deref().unwrap_or("applied"));
        }
        println!(
            "// lowering refused: {:?}; relative error: {:?}\n// result: {r:?}",
            rep.lowering_refused, rep.error
        );
        return ExitCode::from(u8::from(r.is_err()));
    }
    let base = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1)
    });
    println!(
        "mercury-fuzz: seed {base}, {} parser inputs, {} schedules, {} threads",
        args.parser, args.schedules, args.threads
    );
    let multi = MultiProgress::new();
    let corpus = Arc::new(parser::seeds());
    let mut failed = false;

    let limit = |t0: Instant| {
        (args.max_seconds > 0).then(|| t0 + std::time::Duration::from_secs(args.max_seconds))
    };
    let t0 = Instant::now();
    let pb = bar(&multi, args.parser, "parser", args.quiet);
    let c = corpus.clone();
    let (stats, found) = spread(
        args.parser,
        args.threads,
        base,
        limit(t0),
        &pb,
        move |seeds, tick| run_parser(&c, seeds, tick),
    );
    pb.finish();
    report(
        "parser",
        &stats,
        &found,
        t0.elapsed().as_secs_f64(),
        args.save.as_deref(),
    );
    failed |= !found.is_empty();

    let t0 = Instant::now();
    let pb = bar(&multi, args.schedules, "schedules", args.quiet);
    let (stats, found) = spread(
        args.schedules,
        args.threads,
        base,
        limit(t0),
        &pb,
        |seeds, tick| run_schedules(seeds, tick),
    );
    pb.finish();
    report(
        "schedules",
        &stats,
        &found,
        t0.elapsed().as_secs_f64(),
        args.save.as_deref(),
    );
    failed |= !found.is_empty();
    ExitCode::from(u8::from(failed))
}
