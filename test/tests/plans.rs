//! The guard of every behaviour-preserving change to the compiler: insta snapshots of the
//! per-rank `Plan` JSON (exactly what `mercury-opt --emit=plan` prints) for every example ×
//! {no schedule, `--shift-shard`, each schedule in `examples/schedules/`}. A combination the
//! compiler refuses snapshots its rendered diagnostic instead, so refusals are guarded too.
//!
//! The snapshots live in `tests/snapshots/plans/`; a plan over 1 MiB of JSON is kept as its
//! size, hash and comm plan. A refactoring must leave every one of them
//! byte-identical; an intended change of the plans is reviewed with `cargo insta review`.

use mercury_driver::{Compiler, Schedule};
use mercury_ir::Diagnostic;
use mercury_plan::fnv1a;
use mercury_tests::repo;
use std::path::Path;

/// The `.mlir` files of `examples/` and `examples/small/`, repository-relative, sorted.
fn examples() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["examples", "examples/small"] {
        for entry in std::fs::read_dir(repo().join(dir)).expect("examples/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "mlir") {
                let file = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .to_string();
                out.push(format!("{dir}/{file}"));
            }
        }
    }
    out.sort();
    out
}

/// `None` (the operator as written), `shift-shard`, then every schedule script, sorted.
fn schedules() -> Vec<Option<String>> {
    let mut scripts: Vec<String> = std::fs::read_dir(repo().join("examples/schedules"))
        .expect("examples/schedules/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sched"))
        .map(|p| p.file_name().expect("name").to_string_lossy().to_string())
        .collect();
    scripts.sort();
    let mut out = vec![None, Some("shift-shard".to_string())];
    out.extend(scripts.into_iter().map(Some));
    out
}

/// Plans larger than this are kept as a digest: their size, an FNV-1a hash of the JSON and the
/// comm plan (striped placements make plans of megabytes: a piece per run of positions).
const LARGEST_KEPT: usize = 1 << 20;

/// Parse, verify, schedule and lower `example` as `mercury-opt [schedule] --emit=plan` does
/// (through the compile path, `mercury_driver`); a plan over [`LARGEST_KEPT`] bytes becomes
/// its digest.
fn plan_json(example: &str, schedule: Option<&str>) -> Result<String, Diagnostic> {
    let text = std::fs::read_to_string(repo().join(example)).expect("example");
    let schedule = match schedule {
        None => Schedule::default(),
        Some("shift-shard") => Schedule::shift_shard(),
        Some(script) => {
            let path = repo().join("examples/schedules").join(script);
            Schedule {
                script_name: Some(format!("examples/schedules/{script}")),
                ..Schedule::script(&std::fs::read_to_string(path).expect("schedule"))
            }
        }
    };
    let plan = Compiler::new().compile(example, &text, &schedule)?;
    let json = plan.to_json() + "\n";
    if json.len() <= LARGEST_KEPT {
        return Ok(json);
    }
    Ok(format!(
        "plan JSON of {} bytes (over {LARGEST_KEPT}, kept as a digest), FNV-1a 64 {:016x}\n{}",
        json.len(),
        fnv1a(json.as_bytes()),
        mercury_conversion::report::comm_plan(&plan, false)
    ))
}

#[test]
fn plans_of_every_example_and_schedule() {
    let mut compiled = 0;
    let mut cases = 0;
    for example in examples() {
        for schedule in schedules() {
            let stem = |p: &str| {
                Path::new(p)
                    .file_stem()
                    .expect("stem")
                    .to_string_lossy()
                    .to_string()
            };
            let ex = example.trim_start_matches("examples/").replace('/', "_");
            let name = format!(
                "{}__{}",
                stem(&ex),
                schedule.as_deref().map_or("none".to_string(), stem)
            );
            let snapshot = match plan_json(&example, schedule.as_deref()) {
                Ok(json) => {
                    compiled += 1;
                    json
                }
                Err(d) => format!("error\n{}", d.render()),
            };
            cases += 1;
            insta::with_settings!({snapshot_path => "snapshots/plans", prepend_module_to_snapshot => false}, {
                insta::assert_snapshot!(name, snapshot);
            });
        }
    }
    // The examples and schedules exist, and most combinations compile.
    assert!(cases >= 100, "only {cases} combinations");
    assert!(compiled >= 40, "only {compiled} plans compiled");
}
