//! Differential testing: random schedules (random sequences of primitives with random
//! arguments) on small random shapes and meshes must compute what the unscheduled operator
//! computes, on the CPU executor, for fresh random inputs. Illegal steps must be refused with a
//! diagnostic (never a panic) and leave the IR as it was. Fixed seed, reproducible; the case
//! count is bounded by `MERCURY_DIFF_CASES` (default 1200).

use mercury_commir::placement::{check_dim, flatten_splits};
use mercury_commir::{AxisKind, Kernel, Placement, Role, Split, Stmt};
use mercury_ir::pass::{PassManager, PassRegistry};
use mercury_ir::{parse_str, Operation, Registry};
use mercury_runtime::check::{per_rank, DeclaredOutput};
use mercury_runtime::cpu::{execute, execute_pieces, random_inputs, relative_error};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn mesh_text(mesh: &[usize]) -> String {
    format!(
        "[{}]",
        mesh.iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A placement of one dimension: contiguous blocks, or zigzag / striped splits.
#[derive(Debug, Clone)]
struct Place {
    levels: Vec<usize>,
    splits: Vec<(usize, Split)>,
}

/// The ` sharding [...]` of a buffer with `dims` dimensions, `seq_dim` placed by `p`.
fn sharding(dims: usize, seq_dim: Option<usize>, p: &Place) -> String {
    let mut levels = vec![vec![]; dims];
    let mut splits = BTreeMap::new();
    if let Some(d) = seq_dim {
        levels[d] = p.levels.clone();
        splits.extend(p.splits.iter().copied());
    }
    format!(" sharding {}", Placement::new(levels, splits).to_custom())
}

/// A random split of `levels` for a dimension of `size`: a flat zigzag (one round or chunked) or striped one over all
/// of them, a per-level mix, or contiguous blocks; contiguous when the draw does not divide.
fn random_splits(
    rng: &mut ChaCha8Rng,
    levels: &[usize],
    mesh: &[usize],
    size: usize,
) -> Vec<(usize, Split)> {
    let flat = match rng.gen_range(0..6) {
        0 | 1 => Split::Zigzag,
        2 => Split::Striped(*[1usize, 2].choose(rng).unwrap()),
        3 => {
            // A per-level mix: each level block, zigzag or striped on its own.
            let mix: Vec<(usize, Split)> = levels
                .iter()
                .map(|l| {
                    (
                        *l,
                        *[Split::Block, Split::Zigzag, Split::Striped(1)]
                            .choose(rng)
                            .unwrap(),
                    )
                })
                .collect();
            return if check_dim(size, &mix, mesh).is_ok() {
                mix
            } else {
                vec![]
            };
        }
        4 => Split::ZigzagChunks(*[1usize, 2].choose(rng).unwrap()),
        _ => return vec![],
    };
    let s = flatten_splits(flat, levels, mesh);
    if check_dim(size, &s, mesh).is_ok() {
        s
    } else {
        vec![]
    }
}

/// A small random operator: attention (MHA or GQA, causal or not), weighted sum, or a GEMM,
/// with inputs placed replicated or sharded along their sequence/row dimension.
fn random_operator(rng: &mut ChaCha8Rng) -> String {
    let mesh: Vec<usize> = [
        vec![2],
        vec![4],
        vec![2, 2],
        vec![2, 4],
        vec![3],
        vec![2, 2, 2],
    ]
    .choose(rng)
    .unwrap()
    .clone();
    let n: usize = mesh.iter().product();
    let all_levels: Vec<usize> = (0..mesh.len()).collect();
    // Sharded over every level (contiguous, zigzag or striped) or replicated.
    let place = |rng: &mut ChaCha8Rng, size: usize| {
        if rng.gen_bool(0.5) {
            Place {
                levels: all_levels.clone(),
                splits: random_splits(rng, &all_levels, &mesh, size),
            }
        } else {
            Place {
                levels: vec![],
                splits: vec![],
            }
        }
    };
    let m = mesh_text(&mesh);
    match rng.gen_range(0..5) {
        0 | 1 => {
            let s = n * [1, 2][rng.gen_range(0..2)] * 2;
            // Multi-head or grouped-query (group sizes 2 and 4, down to one key/value head).
            let (hk, g) = if rng.gen_bool(0.4) {
                (
                    *[1usize, 2].choose(rng).unwrap(),
                    *[2usize, 4].choose(rng).unwrap(),
                )
            } else {
                (*[2usize, 4].choose(rng).unwrap(), 1)
            };
            let gqa = g > 1;
            let causal = rng.gen_bool(0.5);
            // 4-D [b, heads, seq, d] or 3-D [heads, seq, d] tiles; head dims 2 or 4, the value
            // head dim sometimes another; keys as many as queries or twice as many (non-causal).
            let four_d = rng.gen_bool(0.6);
            let b = *[1usize, 2].choose(rng).unwrap();
            let d = *[2usize, 4].choose(rng).unwrap();
            let dv = if rng.gen_bool(0.3) { d + 1 } else { d };
            let sk = if !causal && rng.gen_bool(0.3) {
                2 * s
            } else {
                s
            };
            let (qs, ks, os) = (place(rng, s), place(rng, sk), place(rng, s));
            let heads = if gqa { "@hk * @g" } else { "@hk" };
            let (bdim, bidx, baxis) = if four_d {
                ("@b, ", "@b, ", format!("  commir.axis @b = {b} spatial\n"))
            } else {
                ("", "", String::new())
            };
            let qidx = format!("{bidx}@hk{}, @i", if gqa { ", @g" } else { "" });
            let gaxis = if gqa {
                format!("  commir.axis @g = {g} spatial\n")
            } else {
                String::new()
            };
            let (nd, seq) = if four_d { (4, 2) } else { (3, 1) };
            format!(
                "commir.mesh @mesh shape {m}\ncommir.kernel @attn on @mesh {{\n{baxis}  commir.axis @hk = {hk} spatial\n{gaxis}  commir.axis @i = {s} spatial\n  commir.axis @j = {sk} managed\n  commir.buffer @Q : [{bdim}{heads}, @i, {d}] f64 in{}\n  commir.buffer @K : [{bdim}@hk, @j, {d}] f64 in{}\n  commir.buffer @V : [{bdim}@hk, @j, {dv}] f64 in{}\n  commir.buffer @O : [{bdim}{heads}, @i, {dv}] f64 out{}\n  %q = commir.load @Q[{qidx}] : !commir.tile<f64>\n  %k = commir.load @K[{bidx}@hk, @j] : !commir.tile<f64>\n  %v = commir.load @V[{bidx}@hk, @j] : !commir.tile<f64>\n  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {{causal = {causal}}} : (!commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>) -> (!commir.tile<f64>, !commir.tile<f64>)\n  commir.reduce lse_merge %o, %lse into @O[{qidx}] : !commir.tile<f64>, !commir.tile<f64>\n}}\n",
                sharding(nd, Some(seq), &qs),
                sharding(nd, Some(seq), &ks),
                sharding(nd, Some(seq), &ks),
                sharding(nd, Some(seq), &os),
            )
        }
        2 => {
            let (i, j) = (n * 2 * rng.gen_range(1..3), n * rng.gen_range(1..3));
            let (a, c) = (place(rng, i), place(rng, i));
            format!(
                "commir.mesh @mesh shape {m}\ncommir.kernel @ws on @mesh {{\n  commir.axis @i = {i} spatial\n  commir.axis @j = {j} managed\n  commir.buffer @A : [@i, @j] f64 in{}\n  commir.buffer @B : [@j] f64 in\n  commir.buffer @C : [@i] f64 out{}\n  %a = commir.load @A[@i, @j] : !commir.tile<f64>\n  %b = commir.load @B[@j] : !commir.tile<f64>\n  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>\n  commir.reduce add %c into @C[@i] : !commir.tile<f64>\n}}\n",
                sharding(2, Some(0), &a),
                sharding(1, Some(0), &c)
            )
        }
        3 => {
            // Two GEMMs with an activation into a rank-local temp between them (the
            // tensor-parallel MLP's body): bodies in two pieces for `distribute`.
            let (mm, dd, ff, ee) = (n * 2, n * rng.gen_range(1..3), n * 2, n);
            let (x, w1, w2, y) = (
                place(rng, mm),
                place(rng, ff),
                place(rng, ff),
                place(rng, mm),
            );
            let act = if rng.gen_bool(0.5) {
                "  %g = commir.unary gelu %a : !commir.tile<f64>\n"
            } else {
                "  %g = commir.scale %a by 0.5 : !commir.tile<f64>\n"
            };
            format!(
                "commir.mesh @mesh shape {m}\ncommir.kernel @mlp on @mesh {{\n  commir.axis @m = {mm} spatial\n  commir.axis @d = {dd} managed\n  commir.axis @f = {ff} managed\n  commir.axis @e = {ee} spatial\n  commir.buffer @X : [@m, @d] f64 in{}\n  commir.buffer @W1 : [@d, @f] f64 in{}\n  commir.buffer @H : [@m, @f] f64 temp\n  commir.buffer @W2 : [@f, @e] f64 in{}\n  commir.buffer @Y : [@m, @e] f64 out{}\n  %x = commir.load @X[@m, @d] : !commir.tile<f64>\n  %w1 = commir.load @W1[@d, @f] : !commir.tile<f64>\n  %a = commir.patch \"gemm\" (%x, %w1) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>\n{act}  commir.store %g into @H[@m, @f] : !commir.tile<f64>\n  %h = commir.load @H[@m, @f] : !commir.tile<f64>\n  %w2 = commir.load @W2[@f, @e] : !commir.tile<f64>\n  %y = commir.patch \"gemm\" (%h, %w2) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>\n  commir.reduce add %y into @Y[@m, @e] : !commir.tile<f64>\n}}\n",
                sharding(2, Some(0), &x),
                sharding(2, Some(1), &w1),
                sharding(2, Some(0), &w2),
                sharding(2, Some(0), &y)
            )
        }
        _ => {
            let (mm, kk, nn) = (n * 2, n * rng.gen_range(1..3), n);
            let ad = rng.gen_range(0..2);
            let bd = 1 - ad;
            let cd = rng.gen_range(0..2);
            let (a, b, c) = (
                place(rng, [mm, kk][ad]),
                place(rng, [kk, nn][bd]),
                place(rng, [mm, nn][cd]),
            );
            // The weight as [k, n] (the gemm patch) or transposed, [n, k] (a matmul with
            // transpose_b, which the patch pass proves is the gemm).
            let transposed = rng.gen_bool(0.35);
            let (bdims, bidx, bsd, mm_op) = if transposed {
                (
                    "[@n, @k]",
                    "@n, @k",
                    1 - bd,
                    "commir.matmul %a, %b transpose_b : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>",
                )
            } else {
                (
                    "[@k, @n]",
                    "@k, @n",
                    bd,
                    "commir.patch \"gemm\" (%a, %b) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>",
                )
            };
            format!(
                "commir.mesh @mesh shape {m}\ncommir.kernel @gemm on @mesh {{\n  commir.axis @m = {mm} spatial\n  commir.axis @k = {kk} managed\n  commir.axis @n = {nn} spatial\n  commir.buffer @A : [@m, @k] f64 in{}\n  commir.buffer @B : {bdims} f64 in{}\n  commir.buffer @C : [@m, @n] f64 out{}\n  %a = commir.load @A[@m, @k] : !commir.tile<f64>\n  %b = commir.load @B[{bidx}] : !commir.tile<f64>\n  %c = {mm_op}\n  commir.reduce add %c into @C[@m, @n] : !commir.tile<f64>\n}}\n",
                sharding(2, Some(ad), &a),
                sharding(2, Some(bsd), &b),
                sharding(2, Some(cd), &c)
            )
        }
    }
}

/// The outputs of `k` with the positions their declared placements give each rank.
fn declared_outputs(k: &Kernel) -> Vec<DeclaredOutput> {
    let mesh = &k.mesh.shape;
    let n: usize = mesh.iter().product();
    k.buffers
        .iter()
        .filter(|b| b.role == Role::Out)
        .map(|b| {
            let shape = k.shape(b);
            let p = b.placement();
            let runs = (0..n)
                .map(|r| {
                    let coords = mercury_plan::coords_of(mesh, r);
                    (0..shape.len())
                        .map(|d| {
                            mercury_commir::placement::dim_runs(shape[d], &p.dim(d), mesh, &coords)
                        })
                        .collect()
                })
                .collect();
            DeclaredOutput {
                name: b.name.clone(),
                shape,
                runs,
            }
        })
        .collect()
}

/// Whether the generated attention's value head dim differs from the query's.
fn dv_differs(text: &str) -> bool {
    let last_dim = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("commir.buffer @{name} :")))
            .and_then(|l| l.split(']').next())
            .and_then(|l| l.rsplit(", ").next())
            .map(str::to_string)
    };
    text.contains("@Q :") && last_dim("Q") != last_dim("V")
}

/// Whether the generated operator's output is declared replicated.
fn replicated_output(text: &str) -> bool {
    text.lines().any(|l| {
        l.contains("commir.buffer @")
            && l.contains(" out")
            && !l.split(" out").nth(1).unwrap_or("").contains("S(")
    })
}

fn divisors(n: usize) -> Vec<usize> {
    (2..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// One random primitive application against the current kernel.
fn random_step(rng: &mut ChaCha8Rng, k: &Kernel) -> String {
    let axes: Vec<&str> = k.axes.iter().map(|a| a.name.as_str()).collect();
    let loops: Vec<&mercury_commir::ForLoop> = k.loops();
    let bufs: Vec<&str> = k.buffers.iter().map(|b| b.name.as_str()).collect();
    let levels = k.mesh.shape.len();
    let pick = |rng: &mut ChaCha8Rng, v: &[&str]| {
        v.choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_else(|| "none".into())
    };
    match rng.gen_range(0..11) {
        0..=2 => {
            let a = k.axes.choose(rng).unwrap();
            let mut f = k.mesh.shape.clone();
            f.extend(divisors(a.extent));
            let factor = f.choose(rng).copied().unwrap_or(2);
            let tag: u32 = rng.gen_range(0..1000);
            format!(
                "tile{{axis={} factor={factor} outer={}_o{tag} inner={}_i{tag}}}",
                a.name, a.name, a.name
            )
        }
        3 | 4 => {
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
        5 | 6 => {
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
            let axis = pick(rng, &seq);
            // After `distribute` several loops may iterate the axis: pick one, and sometimes
            // the offset that puts a shift-reduce's own piece last.
            let count = loops.iter().filter(|l| l.axis == axis).count();
            let nth = if count > 1 {
                format!(" nth={}", rng.gen_range(0..count))
            } else {
                String::new()
            };
            let offset = if rng.gen_bool(0.3) { " offset=1" } else { "" };
            format!("shift{{axis={axis} by={}{nth}{offset}}}", pick(rng, &par))
        }
        10 => {
            let lp = loops
                .choose(rng)
                .map(|l| l.axis.clone())
                .unwrap_or_else(|| pick(rng, &axes));
            format!("distribute{{axis={lp}}}")
        }
        7 => {
            let b = k.buffers.choose(rng).unwrap();
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
        8 => {
            if rng.gen_bool(0.5) {
                format!("replicate{{buffer={}}}", pick(rng, &bufs))
            } else {
                let nested: Vec<(String, String)> = loops
                    .iter()
                    .filter_map(|l| match l.body.as_slice() {
                        [mercury_commir::Stmt::For(inner)] => {
                            Some((l.axis.clone(), inner.axis.clone()))
                        }
                        _ => None,
                    })
                    .collect();
                match nested.choose(rng) {
                    Some((o, i)) => format!("reorder{{outer={o} inner={i}}}"),
                    None => format!(
                        "join{{outer={} inner={}}}",
                        pick(rng, &axes),
                        pick(rng, &axes)
                    ),
                }
            }
        }
        _ => {
            let ins: Vec<&mercury_commir::Buffer> =
                k.buffers.iter().filter(|b| b.role == Role::In).collect();
            let b = ins.choose(rng).unwrap();
            let entries: Vec<String> = (0..b.dims.len())
                .map(|_| {
                    if rng.gen_bool(0.3) {
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
            format!(
                "reshard{{buffer={} sharding={}}}",
                b.name,
                entries.join(",")
            )
        }
    }
}

/// Whether a buffer of `k` is declared or resharded other than in contiguous blocks.
fn not_contiguous(k: &Kernel) -> bool {
    k.buffers.iter().any(|b| !b.placement().is_contiguous())
        || k.body
            .iter()
            .any(|s| matches!(s, Stmt::Reshard { to, .. } if !to.is_contiguous()))
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

fn run_pipeline(
    reg: &Registry,
    passes: &PassRegistry,
    m: &mut Operation,
    p: &str,
) -> Result<(), String> {
    let mut pm = PassManager::new();
    pm.add_pipeline(passes, &format!("builtin.module({p})"))?;
    pm.run(m, reg).map_err(|d| d.render())
}

#[test]
fn random_schedules_compute_the_operator() {
    let cases: usize = std::env::var("MERCURY_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200);
    let reg = mercury_commir::registry();
    let mut passes = PassRegistry::new();
    mercury_passes::register_all(&mut passes);
    let mut rng = ChaCha8Rng::seed_from_u64(0x004d_6572_6375_7279);
    let (mut executed, mut steps_applied, mut steps_refused, mut with_comm) = (0, 0, 0, 0);
    let (mut placed, mut causal_placed) = ([0usize; 3], [0usize; 3]);
    let mut lowering_refused = Vec::new();
    let mut drawn: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sums: BTreeMap<&str, usize> = BTreeMap::new();
    let start = std::time::Instant::now();
    for case in 0..cases {
        let text = random_operator(&mut rng);
        let module = parse_str(&reg, "case.mlir", &text).unwrap_or_else(|d| {
            panic!(
                "case {case}: generated operator is invalid: {}\n{text}",
                d.render()
            )
        });
        let base = mercury_conversion::lower_module(&module, None).unwrap_or_else(|d| {
            panic!(
                "case {case}: unscheduled operator does not lower: {}\n{text}",
                d.render()
            )
        });
        let mut m = module.clone();
        let mut script = Vec::new();
        // Half the cases start from a known-good schedule, then perturb it.
        if rng.gen_bool(0.3) && run_pipeline(&reg, &passes, &mut m, "shift-shard").is_ok() {
            script.push("shift-shard".to_string());
        }
        for _ in 0..rng.gen_range(1..7) {
            let k = mercury_commir::kernels(&m).unwrap().remove(0);
            let step = random_step(&mut rng, &k);
            let before = m.clone();
            match run_pipeline(&reg, &passes, &mut m, &step) {
                Ok(()) => {
                    steps_applied += 1;
                    script.push(step);
                }
                Err(e) => {
                    assert!(
                        e.contains("error:"),
                        "case {case}: refusal without a diagnostic: {e}"
                    );
                    steps_refused += 1;
                    m = before;
                }
            }
        }
        let plan = match mercury_conversion::lower_module(&m, None) {
            Ok(p) => p,
            Err(d) => {
                if std::env::var("MERCURY_DIFF_SHOW").is_ok() {
                    eprintln!("{text}");
                }
                lowering_refused.push(format!(
                    "case {case} [{}]: {}",
                    script.join(", "),
                    d.message
                ));
                continue;
            }
        };
        let inputs = random_inputs(&base, case as u64);
        let want = execute(&base, &inputs).expect("unscheduled plan runs");
        let got = execute(&plan, &inputs)
            .unwrap_or_else(|e| panic!("case {case} [{}]: {e}", script.join(", ")));
        let err = relative_error(&got, &want);
        assert!(
            err < 1e-9,
            "case {case}: schedule [{}] gives relative error {err}\n{text}",
            script.join(", ")
        );
        // Each rank holds exactly its part of every output as declared (replicated: all).
        let held = execute_pieces(&plan, &inputs).expect("runs");
        let shapes = plan
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.shape.clone()))
            .collect();
        let declared = declared_outputs(&mercury_commir::kernels(&module).unwrap()[0]);
        for h in per_rank(&declared, &shapes, &held, &want).unwrap() {
            assert!(
                h.ok(1e-9),
                "case {case}: schedule [{}]: rank {} holds {} of its {} declared elements of '@{}' and {} outside, error {}\n{text}",
                script.join(", "),
                h.rank,
                h.held,
                h.declared,
                h.buffer,
                h.outside,
                h.error
            );
        }
        for (what, hit) in [
            ("3-D attention tiles", text.contains("@Q : [@hk")),
            ("4-D attention tiles", text.contains("@Q : [@b, @hk")),
            ("value head dim other than the query's", dv_differs(&text)),
            ("group size 4", text.contains("@g = 4")),
            ("one key/value head", text.contains("@hk = 1 ")),
            ("transposed weight", text.contains("transpose_b")),
            ("causal", text.contains("causal = true")),
            ("replicated output", replicated_output(&text)),
            ("two GEMMs through a temp", text.contains("@H : ")),
            (
                "distributed loop nest",
                script.iter().any(|s| s.starts_with("distribute")),
            ),
        ] {
            *drawn.entry(what).or_default() += usize::from(hit);
        }
        // The sums of partial results: reduced to the owners of a tile's parts (a strict
        // subset of the group, or parts the reduce-scatter cannot cut), reduce-scattered or
        // all-reduced.
        let sums_by = |f: fn(&mercury_plan::Collective) -> bool| {
            plan.ranks.iter().flat_map(|r| &r.stages).any(|st| {
                st.comm.iter().any(|c| {
                    matches!(c, mercury_plan::CommOp::Collective { collective, .. } if f(collective))
                })
            })
        };
        for (what, hit) in [
            (
                "reduce to owners",
                sums_by(|c| matches!(c, mercury_plan::Collective::Reduce { .. })),
            ),
            (
                "reduce-scatter",
                sums_by(|c| matches!(c, mercury_plan::Collective::ReduceScatter { .. })),
            ),
            (
                "all-reduce",
                sums_by(|c| matches!(c, mercury_plan::Collective::AllReduce { .. })),
            ),
        ] {
            *sums.entry(what).or_default() += usize::from(hit);
        }
        executed += 1;
        if plan.bytes_sent_per_rank().values().any(|b| *b > 0) {
            with_comm += 1;
        }
        let k = mercury_commir::kernels(&m).unwrap().remove(0);
        if not_contiguous(&k) {
            let depth = k.mesh.shape.len().min(3);
            placed[depth - 1] += 1;
            if text.contains("causal = true") {
                causal_placed[depth - 1] += 1;
            }
        }
    }
    eprintln!(
        "differential: {cases} cases, {executed} executed ({with_comm} with communication), {steps_applied} steps applied, {steps_refused} refused, {} schedules the lowering refused, {:.1} s",
        lowering_refused.len(),
        start.elapsed().as_secs_f64()
    );
    eprintln!(
        "differential: zigzag or striped placements on 1-, 2-, 3-level meshes: {placed:?} cases, {causal_placed:?} of them causal attention"
    );
    for l in lowering_refused.iter().take(10) {
        eprintln!("  lowering refused: {l}");
    }
    assert!(
        lowering_refused.is_empty(),
        "legal schedules the lowering refused: {lowering_refused:#?}"
    );
    assert_eq!(executed, cases);
    eprintln!("differential: executed cases per axis of variation: {drawn:?}");
    eprintln!("differential: cases whose plan sums partial results by {sums:?}");
    if cases >= 1000 {
        assert!(
            drawn.values().all(|c| *c >= 10),
            "an axis of variation is drawn too rarely: {drawn:?}"
        );
    }
    // The draws reach zigzag and striped placements of causal attention at every mesh depth.
    if cases >= 1000 {
        assert!(
            causal_placed.iter().all(|c| *c >= 10),
            "too few causal cases with zigzag or striped placements per mesh depth: {causal_placed:?}"
        );
    }
    assert!(
        with_comm * 4 >= executed,
        "too few schedules communicate: {with_comm} of {executed}"
    );
    let _ = AxisKind::Spatial;
}
