//! `mercury-tune FILE --module`: the graph-level search over a module of several kernels
//! (`mercury_search::layer`): every kernel's schedule and every edge's placement chosen
//! together, weights charged `--layers` times per device, the fastest that fits in the
//! topology's usable HBM. Writes `DIR/layer.sched` (run it with `mercury-run FILE --module
//! --schedule DIR/layer.sched`), `DIR/layer.txt` (the pick per kernel, the memory frontier and
//! the 3D-parallel configurations priced by the same model: on a one-level mesh TP+SP, CP,
//! Ulysses and DP over all the devices; on a two-level mesh `[n0, n1]` their products, tensor
//! parallelism over level 1 times context parallelism over level 0) and `DIR/baseline-NAME.sched`
//! for each configuration that lowers and fits, and prints the report.

use crate::{Args, Failure};
use mercury_search::layer::{baselines, LayerError, LayerPick, LayerSearch};
use mercury_search::topology::Topology;
use std::fmt::Write as _;
use std::io::Write as _;

/// The flags that have no meaning for a module search, given.
fn refused(args: &Args) -> Vec<&'static str> {
    [
        ("--kernel", args.kernel.is_some()),
        ("--profile-top", args.profile_top > 0),
        ("--refactor-mesh", args.refactor_mesh),
        ("--max-mesh-levels", args.max_mesh_levels.is_some()),
        ("--no-search", args.no_search),
        ("--cache", args.cache.is_some()),
        ("--launcher", args.launcher.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, g)| g.then_some(f))
    .collect()
}

fn line(s: &LayerSearch, p: &LayerPick) -> String {
    format!(
        "{:.3} ms, {:.2} GB per device",
        p.seconds * 1e3,
        p.memory_bytes as f64 / 1e9
    ) + &if s.layers > 1 {
        format!(" ({} layers' weights)", s.layers)
    } else {
        String::new()
    }
}

/// Runs the module search `args` asks for on `topo`.
pub fn run(args: &Args, topo: &Topology) -> Result<(), Failure> {
    let bad = refused(args);
    if !bad.is_empty() {
        return Err(Failure::new(
            1,
            format!(
                "--module searches every kernel of the module together on the model; it does not take {}",
                bad.join(", ")
            ),
        ));
    }
    let origin = args.file.display().to_string();
    if args.file.extension().and_then(|e| e.to_str()) != Some("mlir") {
        return Err(Failure::new(
            1,
            format!(
                "--module takes a CommIR module of several kernels (.mlir); '{origin}' is not one"
            ),
        ));
    }
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Failure::new(1, format!("cannot read '{origin}': {e}")))?;
    let mut s = LayerSearch::new(&text, &origin, topo).map_err(|e| match e {
        LayerError::Input(located) => Failure {
            code: std::process::ExitCode::from(1),
            text: located,
        },
        e => Failure::new(1, e),
    })?;
    s.layers = args.layers.unwrap_or(1);
    let usable = topo.usable_hbm_bytes();
    let pick = s.best().map_err(|e| Failure::new(1, e))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "module {origin} on {} ({} kernels; usable {:.1} GB per device)",
        topo.name,
        s.kernels().len(),
        usable as f64 / 1e9
    );
    let _ = writeln!(out, "pick: {}", line(&s, &pick));
    for d in s.describe(&pick) {
        let _ = writeln!(out, "  {d}");
    }
    let _ = writeln!(out, "memory frontier (fastest first; every point fits):");
    for p in s.frontier(usable) {
        let _ = writeln!(out, "  {}", line(&s, &p));
    }
    let _ = writeln!(out, "3D-parallel configurations (the same model):");
    let mut configured = Vec::new();
    for b in baselines()
        .into_iter()
        .filter(|b| b.levels == s.mesh_levels())
    {
        match s.baseline(&b, usable) {
            Some(p) => {
                configured.push((slug(b.name), format!("{}: {}", b.name, b.how), p.clone()));
                let _ = writeln!(
                    out,
                    "  {}: {} (pick {:.2}x)",
                    b.name,
                    line(&s, &p),
                    p.seconds / pick.seconds
                );
            }
            None => {
                let _ = writeln!(out, "  {}: none lowers and fits", b.name);
            }
        }
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::new(1, format!("cannot create '{}': {e}", args.out.display())))?;
    let write = |name: &str, body: &str| {
        let p = args.out.join(name);
        std::fs::write(&p, body)
            .map_err(|e| Failure::new(1, format!("cannot write '{}': {e}", p.display())))
    };
    write("layer.sched", &s.script(&pick))?;
    write("layer.txt", &out)?;
    // Each configuration's schedule beside the pick's, its first line saying which it is.
    let mut names = Vec::new();
    for (name, what, p) in &configured {
        let script = s.script(p);
        let body = script.split_once('\n').map_or("", |(_, rest)| rest);
        let file = format!("baseline-{name}.sched");
        write(&file, &format!("# {what}\n{body}"))?;
        names.push(args.out.join(file).display().to_string());
    }
    let sched = args.out.join("layer.sched");
    // A standard output closed early (`| head`) stops the print quietly.
    let _ = writeln!(
        std::io::stdout().lock(),
        "{out}wrote {} (run it: mercury-run {origin} --module --schedule {} --backend cpu --check){}",
        sched.display(),
        sched.display(),
        if names.is_empty() {
            String::new()
        } else {
            format!("\nwrote the configurations' schedules: {}", names.join(", "))
        }
    );
    Ok(())
}

/// A configuration's name as a file name: `TP+SP` -> `tp-sp`, `TPxCP ring` -> `tpxcp-ring`.
fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}
