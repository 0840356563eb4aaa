//! The guard of every behaviour-preserving change to the compiler: insta snapshots of the
//! per-rank `Plan` JSON (exactly what `mercury-opt --emit=plan` prints) for every example ×
//! {no schedule, `--shift-shard`, each schedule in `examples/schedules/`}. A combination the
//! compiler refuses snapshots its rendered diagnostic instead, so refusals are guarded too.
//!
//! The snapshots live in `tests/snapshots/plans/`. A refactoring must leave every one of them
//! byte-identical; an intended change of the plans is reviewed with `cargo insta review`.

use mercury_ir::pass::PassManager;
use mercury_ir::{parse_str, verify, Diagnostic};
use mercury_tests::{passes, registry, repo};
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

/// Parse, verify, schedule and lower `example` as `mercury-opt [schedule] --emit=plan` does.
fn plan_json(example: &str, schedule: Option<&str>) -> Result<String, Diagnostic> {
    let reg = registry(false);
    let text = std::fs::read_to_string(repo().join(example)).expect("example");
    let mut module = parse_str(&reg, example, &text)?;
    verify(&reg, &module)?;
    let pipeline = match schedule {
        None => "builtin.module()".to_string(),
        Some("shift-shard") => "builtin.module(shift-shard)".to_string(),
        Some(script) => {
            let path = repo().join("examples/schedules").join(script);
            mercury_passes::schedule_pipeline(&std::fs::read_to_string(path).expect("schedule"))
        }
    };
    let mut pm = PassManager::new();
    pm.add_pipeline(&passes(), &pipeline).expect("pipeline");
    pm.run(&mut module, &reg)?;
    Ok(mercury_conversion::lower_module(&module, None)?.to_json() + "\n")
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
