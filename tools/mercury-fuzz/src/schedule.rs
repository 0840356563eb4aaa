//! The schedule target: a random small operator ([`crate::operators`]) and a random sequence of
//! schedule primitives with random options, drawn one step at a time against the current
//! kernel (so that most steps name loops, axes and buffers that exist), through the lowering
//! and the CPU executor.
//!
//! Properties (a violation is a [`Failure`]):
//! - no pass, the lowering or the executor panics;
//! - a refused step or lowering reports an error with a source location;
//! - each applied step leaves IR that prints and parses back to the same text;
//! - a plan that lowers runs, and computes the unscheduled operator's outputs: relative error
//!   below 1e-9 on fresh random inputs; outputs no piece writes stay NaN (poisoned) and count
//!   as infinitely wrong.

use crate::operators::{self, Operator};
use crate::{catch, located, Failure};
use mercury_commir::{Kernel, Role, Stmt};
use mercury_ir::pass::{PassManager, PassRegistry};
use mercury_ir::{parse_str, print_op, Operation, PrintOptions, Registry};
use mercury_plan::Plan;
use mercury_runtime::cpu::{execute, random_inputs, relative_error};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The largest relative error a schedule may show against the unscheduled operator.
pub const TOLERANCE: f64 = 1e-9;

/// Registry and passes, built once per thread.
pub struct Ctx {
    /// Builtin dialects and CommIR (unregistered ops refused), as `mercury-opt` has them.
    pub reg: Registry,
    /// Every pass `mercury-opt` has.
    pub passes: PassRegistry,
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx {
            reg: mercury_driver::registry(false),
            passes: mercury_driver::passes(),
        }
    }
}

/// What happened to one case.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The operator's text.
    pub operator: String,
    /// Every step tried, in order, with `None` when it applied or the refusal's message.
    pub steps: Vec<(String, Option<String>)>,
    /// The unscheduled operator or the scheduled one was refused by the lowering (message).
    pub lowering_refused: Option<String>,
    /// The plan was executed and compared; the relative error.
    pub error: Option<f64>,
}

impl Report {
    /// The applied steps as a schedule script (one pass per line).
    pub fn script(&self) -> String {
        self.steps
            .iter()
            .filter(|(_, r)| r.is_none())
            .map(|(s, _)| format!("{s}\n"))
            .collect()
    }
    /// A regression file for `corpus/schedules`: the steps as `// step:` lines, then the
    /// operator.
    pub fn corpus_text(&self) -> String {
        let mut t: String = self
            .steps
            .iter()
            .map(|(s, _)| format!("// step: {s}\n"))
            .collect();
        t.push_str(&self.operator);
        t
    }
}

fn divisors(n: usize) -> Vec<usize> {
    (2..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// A random ` placement=...` option of `parallelize` or `shard` (often none).
fn placement_option(rng: &mut ChaCha8Rng) -> String {
    match rng.gen_range(0..8) {
        0 | 1 => " placement=zigzag".into(),
        2 => format!(" placement=striped({})", [1, 2].choose(rng).unwrap()),
        3 => " placement=block".into(),
        _ => String::new(),
    }
}

/// One random primitive application against the current kernel `k`.
pub fn random_step(rng: &mut ChaCha8Rng, k: &Kernel) -> String {
    let axes: Vec<&str> = k.axes.iter().map(|a| a.name.as_str()).collect();
    let loops = k.loops();
    let bufs: Vec<&str> = k.buffers.iter().map(|b| b.name.as_str()).collect();
    let levels = k.mesh.shape.len().max(1);
    let pick = |rng: &mut ChaCha8Rng, v: &[&str]| {
        v.choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_else(|| "none".into())
    };
    match rng.gen_range(0..24) {
        0..=3 => {
            let Some(a) = k.axes.choose(rng) else {
                return "tile{axis=none factor=2}".into();
            };
            let mut f = k.mesh.shape.clone();
            f.extend(divisors(a.extent));
            if rng.gen_range(0..20) == 0 {
                f.push(*[0usize, 1, a.extent + 1].choose(rng).unwrap());
            }
            let factor = f.choose(rng).copied().unwrap_or(2);
            let tag: u32 = rng.gen_range(0..1000);
            format!(
                "tile{{axis={} factor={factor} outer={}_o{tag} inner={}_i{tag}}}",
                a.name, a.name, a.name
            )
        }
        4..=6 => {
            let lp = loops
                .choose(rng)
                .map(|l| l.axis.clone())
                .unwrap_or_else(|| pick(rng, &axes));
            format!(
                "parallelize{{axis={lp} level={} shard={}{}}}",
                rng.gen_range(0..levels),
                rng.gen_bool(0.7),
                placement_option(rng)
            )
        }
        7..=9 => {
            let seq: Vec<&str> = loops
                .iter()
                .filter(|l| l.parallel.is_none())
                .map(|l| l.axis.as_str())
                .collect();
            let par: Vec<&str> = loops
                .iter()
                .filter(|l| l.parallel.is_some())
                .map(|l| l.axis.as_str())
                .collect();
            let offset = if rng.gen_bool(0.25) {
                format!(" offset={}", rng.gen_range(0..3))
            } else {
                String::new()
            };
            let axis = pick(rng, &seq);
            // After `distribute` several loops may iterate the axis (nth up to one past them).
            let count = loops.iter().filter(|l| l.axis == axis).count();
            let nth = if count > 1 || rng.gen_range(0..20) == 0 {
                format!(" nth={}", rng.gen_range(0..=count))
            } else {
                String::new()
            };
            format!("shift{{axis={axis} by={}{offset}{nth}}}", pick(rng, &par))
        }
        10 | 11 => {
            let Some(b) = k.buffers.choose(rng) else {
                return "shard{buffer=none axis=none}".into();
            };
            let ax: Vec<String> = b.axis_slots().into_iter().map(|(_, a)| a).collect();
            let a = ax.choose(rng).cloned().unwrap_or_default();
            if rng.gen_bool(0.5) {
                format!(
                    "shard{{buffer={} axis={a}{}}}",
                    b.name,
                    placement_option(rng)
                )
            } else {
                format!(
                    "shard{{buffer={} axis={a} level={}{}}}",
                    b.name,
                    rng.gen_range(0..levels),
                    placement_option(rng)
                )
            }
        }
        12 => {
            let b = pick(rng, &bufs);
            if rng.gen_bool(0.5) {
                format!("replicate{{buffer={b}}}")
            } else {
                format!("replicate{{buffer={b} axis={}}}", pick(rng, &axes))
            }
        }
        13 | 14 => {
            let nested: Vec<(String, String)> = loops
                .iter()
                .filter_map(|l| match l.body.as_slice() {
                    [Stmt::For(inner)] => Some((l.axis.clone(), inner.axis.clone())),
                    _ => None,
                })
                .collect();
            match (rng.gen_bool(0.5), nested.choose(rng)) {
                (true, Some((o, i))) => format!("reorder{{outer={o} inner={i}}}"),
                _ => {
                    // Adjacent axes (the tile pass's outer and inner) join back.
                    let pairs: Vec<(String, String)> = k
                        .axes
                        .windows(2)
                        .map(|w| (w[0].name.clone(), w[1].name.clone()))
                        .collect();
                    match pairs.choose(rng) {
                        Some((o, i)) if rng.gen_bool(0.7) => {
                            format!("join{{outer={o} inner={i}}}")
                        }
                        _ => format!(
                            "join{{outer={} inner={}}}",
                            pick(rng, &axes),
                            pick(rng, &axes)
                        ),
                    }
                }
            }
        }
        15 | 16 => {
            let ins: Vec<&mercury_commir::Buffer> = k
                .buffers
                .iter()
                .filter(|b| b.role == Role::In || rng.gen_bool(0.2))
                .collect();
            let Some(b) = ins.choose(rng) else {
                return "reshard{buffer=none sharding=R}".into();
            };
            let entries: Vec<String> = (0..b.dims.len())
                .map(|_| {
                    if rng.gen_bool(0.35) {
                        let l = rng.gen_range(0..levels);
                        match rng.gen_range(0..4) {
                            0 => format!("S(zigzag({l}))"),
                            1 => format!("S(striped({l};{}))", [1, 2].choose(rng).unwrap()),
                            _ => format!("S({l})"),
                        }
                    } else {
                        "R".into()
                    }
                })
                .collect();
            let at = if b.role != Role::In && rng.gen_bool(0.5) {
                " at=end"
            } else {
                ""
            };
            format!(
                "reshard{{buffer={} sharding={}{at}}}",
                b.name,
                entries.join(",")
            )
        }
        17 => format!(
            "patch{{kernel={}}}",
            ["attention", "attention_bwd", "gemm"].choose(rng).unwrap()
        ),
        18 => "balance-causal".into(),
        19 => match rng.gen_range(0..3) {
            0 => "shift-shard".into(),
            1 => "shift-shard{balance=false}".into(),
            _ => format!("shift-shard{{axis={}}}", pick(rng, &axes)),
        },
        20 => {
            let n: usize = k.mesh.shape.iter().product();
            let shapes: Vec<String> = divisors(n)
                .into_iter()
                .map(|d| {
                    if d == n {
                        n.to_string()
                    } else {
                        format!("{}x{d}", n / d)
                    }
                })
                .collect();
            format!(
                "reshape-mesh{{shape={}}}",
                shapes.choose(rng).cloned().unwrap_or_else(|| "2".into())
            )
        }
        21 => {
            let lp = loops
                .choose(rng)
                .map(|l| l.axis.clone())
                .unwrap_or_else(|| pick(rng, &axes));
            format!("distribute{{axis={lp}}}")
        }
        22 => {
            // Mostly an output that something reduces into (dK, dV, C), shifted or not yet.
            let outs: Vec<&str> = k
                .buffers
                .iter()
                .filter(|b| b.role != Role::In)
                .map(|b| b.name.as_str())
                .collect();
            let b = if rng.gen_bool(0.9) {
                pick(rng, &outs)
            } else {
                pick(rng, &bufs)
            };
            format!("carry{{buffer={b}}}")
        }
        _ => "single-device".into(),
    }
}

/// Runs one pass pipeline step; the error is the rendered refusal, or a [`Failure`] when the
/// refusal has no location.
fn apply(ctx: &Ctx, m: &mut Operation, step: &str) -> Result<Result<(), String>, Failure> {
    let mut pm = PassManager::new();
    if let Err(e) = pm.add_pipeline(&ctx.passes, &format!("builtin.module({step})")) {
        // Options the pass's constructor refuses (mercury-opt reports them as a usage error).
        return Ok(Err(e));
    }
    match pm.run(m, &ctx.reg) {
        Ok(()) => Ok(Ok(())),
        Err(d) if located(&d) => Ok(Err(d.render())),
        Err(d) => Err(Failure::Mismatch(format!(
            "step `{step}` refused without a source location: {}",
            d.render()
        ))),
    }
}

/// The scheduled IR prints and parses back to the same text.
fn reprints(ctx: &Ctx, m: &Operation, step: &str) -> Result<(), Failure> {
    let once = print_op(&ctx.reg, m, PrintOptions::default());
    let back = parse_str(&ctx.reg, "scheduled.mlir", &once).map_err(|d| {
        Failure::Mismatch(format!(
            "IR after `{step}` does not parse back: {}\n{once}",
            d.render()
        ))
    })?;
    let twice = print_op(&ctx.reg, &back, PrintOptions::default());
    if once != twice {
        return Err(Failure::Mismatch(format!(
            "IR after `{step}` prints differently when read back:\n--- once\n{once}\n--- twice\n{twice}"
        )));
    }
    Ok(())
}

/// Applies `head` (given steps), then `tail.1` steps drawn from `tail.0` against the current
/// IR, lowers, runs and compares.
fn run(
    ctx: &Ctx,
    op: &Operator,
    head: &[String],
    tail: Option<(&mut ChaCha8Rng, usize)>,
    input_seed: u64,
    report: &mut Report,
) -> Result<(), Failure> {
    report.operator = op.text.clone();
    let module = parse_str(&ctx.reg, "operator.mlir", &op.text).map_err(|d| {
        Failure::Mismatch(format!(
            "the generated operator does not parse: {}\n{}",
            d.render(),
            op.text
        ))
    })?;
    mercury_ir::verify(&ctx.reg, &module).map_err(|d| {
        Failure::Mismatch(format!(
            "the generated operator does not verify: {}\n{}",
            d.render(),
            op.text
        ))
    })?;
    let mut m = module.clone();
    let one = |step: String, m: &mut Operation, report: &mut Report| -> Result<(), Failure> {
        let before = m.clone();
        match apply(ctx, m, &step)? {
            Ok(()) => {
                reprints(ctx, m, &step)?;
                report.steps.push((step, None));
            }
            Err(e) => {
                *m = before;
                report.steps.push((step, Some(e)));
            }
        }
        Ok(())
    };
    for step in head {
        one(step.clone(), &mut m, report)?;
    }
    if let Some((rng, n)) = tail {
        for _ in 0..n {
            let step = match mercury_commir::kernels(&m) {
                Ok(mut ks) if !ks.is_empty() => random_step(rng, &ks.remove(0)),
                Ok(_) => "single-device".to_string(),
                Err(d) => {
                    return Err(Failure::Mismatch(format!(
                        "verified IR has no kernel model: {}",
                        d.render()
                    )))
                }
            };
            one(step, &mut m, report)?;
        }
    }
    let lower = |m: &Operation, what: &str| match mercury_conversion::lower_module(m, None) {
        Ok(p) => Ok(Some(p)),
        Err(d) if located(&d) => Ok(None),
        Err(d) => Err(Failure::Mismatch(format!(
            "the lowering of the {what} operator refused without a source location: {}",
            d.render()
        ))),
    };
    let Some(base) = lower(&module, "unscheduled")? else {
        report.lowering_refused = Some("the unscheduled operator".into());
        return Ok(());
    };
    let Some(plan) = lower(&m, "scheduled")? else {
        report.lowering_refused = Some("the scheduled operator".into());
        return Ok(());
    };
    report.error = Some(compare(&base, &plan, input_seed)?);
    Ok(())
}

/// Runs `base` (the unscheduled operator's plan, the reference) and `plan` on the CPU executor
/// with inputs drawn from `input_seed` and returns the relative error; a plan that does not
/// run, has other outputs or errs by [`TOLERANCE`] or more (NaN from an unwritten, poisoned
/// element included) is a [`Failure::Mismatch`].
pub fn compare(base: &Plan, plan: &Plan, input_seed: u64) -> Result<f64, Failure> {
    let inputs = random_inputs(base, input_seed);
    let want = execute(base, &inputs).map_err(|e| {
        Failure::Mismatch(format!("the unscheduled operator's plan does not run: {e}"))
    })?;
    let got = execute(plan, &inputs)
        .map_err(|e| Failure::Mismatch(format!("the scheduled plan does not run: {e}")))?;
    let mut names: Vec<&String> = got.keys().collect();
    let mut wnames: Vec<&String> = want.keys().collect();
    names.sort();
    wnames.sort();
    if names != wnames {
        return Err(Failure::Mismatch(format!(
            "the scheduled plan has outputs {names:?}, the operator {wnames:?}"
        )));
    }
    let err = relative_error(&got, &want);
    if err.is_nan() || err >= TOLERANCE {
        return Err(Failure::Mismatch(format!(
            "the scheduled plan computes something else: relative error {err}"
        )));
    }
    Ok(err)
}

/// Case `seed`: a random operator and 1 to 7 random steps (a third of the cases start with
/// `shift-shard`, a known-good schedule, and perturb it), lowered and compared on inputs drawn
/// from `seed`.
pub fn run_seed(ctx: &Ctx, seed: u64) -> (Report, Result<(), Failure>) {
    run_seed_of(ctx, seed, None)
}

/// [`run_seed`] with the operator drawn from `family` (any family when `None`).
pub fn run_seed_of(
    ctx: &Ctx,
    seed: u64,
    family: Option<operators::Family>,
) -> (Report, Result<(), Failure>) {
    let mut report = Report::default();
    let r = catch(|| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let op = match family {
            Some(f) => operators::draw_family(&mut rng, f),
            None => operators::draw(&mut rng),
        };
        let head: Vec<String> = if rng.gen_bool(0.3) {
            vec!["shift-shard".to_string()]
        } else {
            vec![]
        };
        let n = rng.gen_range(1..8);
        run(ctx, &op, &head, Some((&mut rng, n)), seed, &mut report)
    })
    .and_then(|r| r);
    (report, r)
}

/// Replays a regression file of `corpus/schedules` (`// step:` lines, then the operator) with
/// inputs drawn from `input_seed`.
pub fn run_corpus_text(ctx: &Ctx, text: &str, input_seed: u64) -> (Report, Result<(), Failure>) {
    let steps: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("// step: "))
        .map(|s| s.trim().to_string())
        .collect();
    let op = Operator {
        family: operators::Family::Attention,
        causal: false,
        text: text.to_string(),
    };
    let mut report = Report::default();
    let r = catch(|| run(ctx, &op, &steps, None, input_seed, &mut report)).and_then(|r| r);
    (report, r)
}
