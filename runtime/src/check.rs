//! Checking a run's outputs rank by rank: each rank must hold exactly the part of every output
//! its declared placement gives it (all of it when replicated), with the reference's values.
//! The union of the ranks' pieces being right is not enough: an output delivered in another
//! placement than declared, or one rank's wrong copy hidden behind another's, fails here.
//! [`compare`] holds whole outputs (or the elements a mask keeps) to a reference.

use crate::cpu::HeldPiece;
use rayon::prelude::*;
use std::collections::HashMap;

/// An output as declared: its shape and, per rank and dimension, the runs (start, length) of
/// positions the rank must hold (from the placement's `dim_runs`).
#[derive(Debug, Clone)]
pub struct DeclaredOutput {
    /// The output's name.
    pub name: String,
    /// Its global shape (elements).
    pub shape: Vec<usize>,
    /// `runs[rank][dim]`: the positions of `dim` the rank holds.
    pub runs: Vec<Vec<Vec<(usize, usize)>>>,
}

/// What one rank holds of one output, measured against its declared part.
#[derive(Debug, Clone, PartialEq)]
pub struct RankHolding {
    /// The output's name.
    pub buffer: String,
    /// The rank.
    pub rank: usize,
    /// Elements the declared placement gives the rank.
    pub declared: usize,
    /// Of those, the elements the rank holds.
    pub held: usize,
    /// Elements the rank holds outside its declared part.
    pub outside: usize,
    /// ‖got − want‖ / ‖want‖ over the elements the rank holds (infinite where a value is not
    /// finite, unless it is the reference's own: [`same_nonfinite`]).
    pub error: f64,
}

impl RankHolding {
    /// Whether the rank holds exactly its declared part, within `tol` of the reference.
    pub fn ok(&self, tol: f64) -> bool {
        self.held == self.declared && self.outside == 0 && self.error <= tol
    }
}

/// Each rank's output pieces (`held`, from [`crate::cpu::execute_pieces`]) against its declared
/// part of each output and against the reference outputs `want` (full tensors by name,
/// row-major). One row per (output, rank), outputs in the order given.
///
/// Pieces are regions of the plan's buffer (`plan_shape`), which may merge adjacent declared
/// dimensions (a `join`): positions are compared through their row-major element index.
/// `Err` when an output's plan shape holds another number of elements than declared.
pub fn per_rank(
    declared: &[DeclaredOutput],
    plan_shapes: &HashMap<String, Vec<usize>>,
    held: &[HeldPiece],
    want: &HashMap<String, Vec<f64>>,
) -> Result<Vec<RankHolding>, String> {
    let mut out = Vec::new();
    for b in declared {
        let Some(w) = want.get(&b.name) else {
            continue;
        };
        let plan_shape = plan_shapes.get(&b.name).unwrap_or(&b.shape);
        let numel: usize = b.shape.iter().product();
        if plan_shape.iter().product::<usize>() != numel || w.len() != numel {
            return Err(format!(
                "output '@{}' is declared {:?} but the plan holds it as {:?}",
                b.name, b.shape, plan_shape
            ));
        }
        for (r, runs) in b.runs.iter().enumerate() {
            // Per dimension, which positions are the rank's.
            let mine: Vec<Vec<bool>> = b
                .shape
                .iter()
                .zip(runs)
                .map(|(&size, runs)| {
                    let mut v = vec![false; size];
                    for &(start, len) in runs {
                        v[start..start + len].iter_mut().for_each(|x| *x = true);
                    }
                    v
                })
                .collect();
            let declared_count: usize = mine
                .iter()
                .map(|v| v.iter().filter(|x| **x).count())
                .product();
            let mut seen = vec![false; w.len()];
            let (mut held_in, mut outside) = (0, 0);
            let (mut num, mut den, mut bad) = (0.0, 0.0, false);
            for p in held.iter().filter(|p| p.rank == r && p.buffer == b.name) {
                let mut pos = vec![0; b.shape.len()];
                for_each_position(plan_shape, &p.region, |i, flat| {
                    if seen[flat] {
                        return;
                    }
                    seen[flat] = true;
                    // The declared position of the element.
                    let mut rest = flat;
                    for d in (0..pos.len()).rev() {
                        pos[d] = rest % b.shape[d];
                        rest /= b.shape[d];
                    }
                    if pos.iter().enumerate().all(|(d, x)| mine[d][*x]) {
                        held_in += 1;
                    } else {
                        outside += 1;
                    }
                    let g = p.values[i];
                    if same_nonfinite(g, w[flat]) {
                        return;
                    }
                    bad |= !g.is_finite() || !w[flat].is_finite();
                    num += (g - w[flat]) * (g - w[flat]);
                    den += w[flat] * w[flat];
                });
            }
            let error = if bad {
                f64::INFINITY
            } else {
                f64::sqrt(num) / f64::sqrt(den).max(1e-300)
            };
            out.push(RankHolding {
                buffer: b.name.clone(),
                rank: r,
                declared: declared_count,
                held: held_in,
                outside,
                error,
            });
        }
    }
    Ok(out)
}

/// Calls `f(i, flat)` for the elements of `region` of a row-major tensor of `shape` (`flat`:
/// the element's index in the tensor), `i` counting them row-major over the region.
fn for_each_position(
    shape: &[usize],
    region: &mercury_plan::Region,
    mut f: impl FnMut(usize, usize),
) {
    let total: usize = region.extent.iter().product();
    let mut pos = region.offset.clone();
    for i in 0..total {
        let flat = pos.iter().zip(shape).fold(0, |acc, (p, s)| acc * s + p);
        f(i, flat);
        // The next position, the last dimension fastest.
        for d in (0..pos.len()).rev() {
            pos[d] += 1;
            if pos[d] < region.offset[d] + region.extent[d] {
                break;
            }
            pos[d] = region.offset[d];
        }
    }
}

/// Outputs read value by value as f64: the CPU executor's `Vec<f64>`, the CUDA executor's
/// downloads in their own dtype.
pub trait Values: Sync {
    /// Number of values.
    fn count(&self) -> usize;
    /// Value `i` (< count) as f64.
    fn value(&self, i: usize) -> f64;
}

impl Values for Vec<f64> {
    fn count(&self) -> usize {
        self.len()
    }
    fn value(&self, i: usize) -> f64 {
        self[i]
    }
}

#[cfg(feature = "cuda")]
impl Values for crate::cuda::HostBuffer {
    fn count(&self) -> usize {
        self.len()
    }
    fn value(&self, i: usize) -> f64 {
        self.at(i)
    }
}

/// How far one element may be from the reference, as a multiple of the norm-wise tolerance:
/// |got − want| ≤ `ELEMENT_FACTOR` × tol × (rms + |want|), with rms the reference output's
/// root mean square (numpy's `allclose` with rtol = `ELEMENT_FACTOR` × tol and atol = rtol ×
/// rms). A norm-wise check alone lets a few wrong elements through in a large output: one row
/// of 4096 left at zero in a 4096 x 4096 output moves ‖got − want‖ / ‖want‖ by 1/64, inside
/// the GPU's 2e-2. With the GPU's tolerance the bound is 0.2 × (rms + |want|); rounding bf16
/// operands and outputs and summing in another order reach 3.2e-2 at most in the 21 compiled
/// schedules on one H200 (the striped causal ring; most about 1.4e-2; docs/perf.md). The
/// |want| term keeps elements far above the rms (the first rows of causal attention, each the
/// value of a few keys) to their own scale: measured against the rms alone the striped ring
/// reached 8.8e-2.
pub const ELEMENT_FACTOR: f64 = 10.0;

/// Whether `got` and `want` are the same infinity. Such an element matches the reference
/// exactly (a causal mask's `-inf`s stored into an output); it is left out of the norms
/// (`inf - inf` is NaN) and reported as a count. NaN matches nothing, NaN included: a
/// reference that computes NaN says nothing a check can hold a schedule to (a body lowered
/// wrongly on both sides, a tiled input that is its own reference, passed as "NaN in both"
/// until 2026-12-03), so the check fails and says the reference holds NaN.
pub fn same_nonfinite(got: f64, want: f64) -> bool {
    want.is_infinite() && got == want
}

/// One output's comparison over the compared elements: ‖got − want‖ / ‖want‖ (infinite when
/// a got value is not finite or the lengths differ), the largest |got − want| / (rms + |want|)
/// ([`ELEMENT_FACTOR`]), the non-finite got values and the number of elements compared.
pub struct Compared {
    pub name: String,
    pub rel_err: f64,
    /// max |got − want| / (rms(want) + |want|) (0 when equal, infinite when the reference is
    /// all zeros and got is not).
    pub worst: f64,
    pub nonfinite: usize,
    /// Elements that are infinite in the reference and the same in got ([`same_nonfinite`]):
    /// matched exactly, left out of the norms.
    pub nonfinite_matched: usize,
    /// Elements that are NaN in the reference (the check fails where there are any).
    pub reference_nan: usize,
    pub elements: usize,
}

impl Compared {
    /// Whether the output passes at norm-wise tolerance `tol`: `rel_err <= tol` and every
    /// element within [`ELEMENT_FACTOR`] `* tol * (rms + |want|)`.
    pub fn within(&self, tol: f64) -> bool {
        self.rel_err <= tol && self.worst <= ELEMENT_FACTOR * tol
    }
    /// `relative error E (tolerance T), largest element error W of (rms + |want|) (at most B)`,
    /// `, N non-finite in both (as the reference)` when some elements are, and `; the
    /// reference itself holds N NaN` when it does.
    pub fn describe(&self, tol: f64) -> String {
        format!(
            "relative error {:.3e} (tolerance {tol:.0e}), largest element error {:.1e} of (rms + |want|) (at most {:.0e}){}{}",
            self.rel_err,
            self.worst,
            ELEMENT_FACTOR * tol,
            if self.nonfinite_matched > 0 {
                format!(", {} non-finite in both (as the reference)", self.nonfinite_matched)
            } else {
                String::new()
            },
            if self.reference_nan > 0 {
                format!(
                    "; the reference itself holds {} NaN (the operator as written computes NaN there: not a value to check against)",
                    self.reference_nan
                )
            } else {
                String::new()
            }
        )
    }
}

/// Compares every output of `want` with `got`, in parallel, over the elements `mask` keeps
/// (per output; all of them without a mask).
pub fn compare<V: Values>(
    got: &HashMap<String, V>,
    want: &HashMap<String, V>,
    mask: Option<&HashMap<String, Vec<bool>>>,
) -> Vec<Compared> {
    let mut out = Vec::new();
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let w = &want[name];
        let keep = mask.and_then(|m| m.get(name));
        let kept = |i: &usize| keep.is_none_or(|k| k.get(*i).copied().unwrap_or(false));
        let elements = (0..w.count()).into_par_iter().filter(kept).count();
        let Some(g) = got.get(name).filter(|g| g.count() == w.count()) else {
            out.push(Compared {
                name: name.clone(),
                rel_err: f64::INFINITY,
                worst: f64::INFINITY,
                nonfinite: 0,
                nonfinite_matched: 0,
                reference_nan: 0,
                elements,
            });
            continue;
        };
        let reference_nan = (0..w.count())
            .into_par_iter()
            .filter(kept)
            .filter(|i| w.value(*i).is_nan())
            .count();
        let (nonfinite, matched, num, den) = (0..w.count())
            .into_par_iter()
            .filter(kept)
            .map(|i| {
                let (a, b) = (g.value(i), w.value(i));
                if same_nonfinite(a, b) {
                    (0, 1, 0.0, 0.0)
                } else {
                    (usize::from(!a.is_finite()), 0, (a - b) * (a - b), b * b)
                }
            })
            .reduce(
                || (0, 0, 0.0, 0.0),
                |x, y| (x.0 + y.0, x.1 + y.1, x.2 + y.2, x.3 + y.3),
            );
        let (rel_err, worst) = if nonfinite > 0 || reference_nan > 0 || !num.is_finite() {
            (f64::INFINITY, f64::INFINITY)
        } else {
            let rms = (den / (elements - matched).max(1) as f64).sqrt();
            let worst = (0..w.count())
                .into_par_iter()
                .filter(kept)
                .map(|i| {
                    let (a, b) = (g.value(i), w.value(i));
                    let d = (a - b).abs();
                    if d == 0.0 || same_nonfinite(a, b) {
                        0.0
                    } else {
                        d / (rms + b.abs())
                    }
                })
                .reduce(|| 0.0, f64::max);
            (num.sqrt() / den.sqrt().max(1e-300), worst)
        };
        out.push(Compared {
            name: name.clone(),
            rel_err,
            worst,
            nonfinite,
            nonfinite_matched: matched,
            reference_nan,
            elements,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{assemble, execute_pieces, random_inputs};
    use mercury_driver::{Compiler, Schedule};

    #[test]
    fn the_references_own_infinities_match_and_others_fail() {
        let cmp = |g: Vec<f64>, w: Vec<f64>| {
            let got = HashMap::from([("C".to_string(), g)]);
            let want = HashMap::from([("C".to_string(), w)]);
            compare(&got, &want, None).remove(0)
        };
        let ninf = f64::NEG_INFINITY;
        // A masked output: -inf where the reference has it, numbers elsewhere.
        let c = cmp(vec![1.0, ninf, 2.0], vec![1.0, ninf, 2.0]);
        assert!(c.within(1e-9), "{}", c.describe(1e-9));
        assert_eq!((c.nonfinite, c.nonfinite_matched), (0, 1));
        assert!(c.describe(1e-9).contains("1 non-finite in both"));
        // -inf where the reference has a number, a number where it has -inf, +inf for -inf.
        for (g, w) in [
            (vec![1.0, ninf], vec![1.0, 3.0]),
            (vec![1.0, 3.0], vec![1.0, ninf]),
            (vec![1.0, f64::INFINITY], vec![1.0, ninf]),
            (vec![1.0, f64::NAN], vec![1.0, ninf]),
            // NaN in both: the reference says nothing there.
            (vec![1.0, f64::NAN], vec![1.0, f64::NAN]),
            (vec![1.0, 2.0], vec![1.0, f64::NAN]),
        ] {
            let c = cmp(g.clone(), w.clone());
            assert!(
                !c.within(1e-2),
                "{g:?} vs {w:?} passed: {}",
                c.describe(1e-2)
            );
        }
    }

    /// A row sum on 4 ranks whose output placement is `out`.
    fn rowsum(out: &str) -> String {
        format!(
            "commir.mesh @m shape [4]
commir.kernel @rs on @m {{
  commir.axis @i = 16 spatial
  commir.axis @j = 8 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out{out}
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}}
"
        )
    }

    /// The row sum's output @C (16 rows) on 4 ranks: in blocks of 4 or whole on each.
    fn declared(sharded: bool) -> Vec<DeclaredOutput> {
        let runs = (0..4)
            .map(|r| {
                vec![if sharded {
                    vec![(4 * r, 4)]
                } else {
                    vec![(0, 16)]
                }]
            })
            .collect();
        vec![DeclaredOutput {
            name: "C".into(),
            shape: vec![16],
            runs,
        }]
    }

    fn shapes() -> HashMap<String, Vec<usize>> {
        HashMap::from([("C".to_string(), vec![16])])
    }

    const SCHED: &str = "tile{axis=i factor=4 outer=i0 inner=i_t}\nparallelize{axis=i0 level=0}\n";

    #[test]
    fn each_rank_is_held_to_the_declared_placement() {
        let c = Compiler::new();
        let sharded = rowsum(" sharding [S(0)]");
        let plan = c
            .compile("rs.mlir", &sharded, &Schedule::script(SCHED))
            .unwrap();
        let inputs = random_inputs(&plan, 7);
        let reference = c
            .compile("rs.mlir", &sharded, &Schedule::default())
            .unwrap();
        let want = assemble(&reference, &execute_pieces(&reference, &inputs).unwrap());
        let held = execute_pieces(&plan, &inputs).unwrap();
        // Against its own declaration: every rank holds its 4 rows.
        let rows = per_rank(&declared(true), &shapes(), &held, &want).unwrap();
        assert_eq!(rows.len(), 4);
        assert!(
            rows.iter().all(|h| h.ok(1e-9) && h.declared == 4),
            "{rows:?}"
        );
        // The same plan against a replicated declaration: the union is complete, but each
        // rank holds a quarter of what it must.
        let rows = per_rank(&declared(false), &shapes(), &held, &want).unwrap();
        assert!(rows
            .iter()
            .all(|h| !h.ok(1e-9) && h.held == 4 && h.declared == 16));
        // A wrong value on one rank is that rank's failure.
        let mut poisoned = held.clone();
        let p = poisoned.iter_mut().find(|p| p.rank == 2).unwrap();
        p.values[0] += 1.0;
        let rows = per_rank(&declared(true), &shapes(), &poisoned, &want).unwrap();
        let failed: Vec<usize> = rows
            .iter()
            .filter(|h| !h.ok(1e-9))
            .map(|h| h.rank)
            .collect();
        assert_eq!(failed, vec![2]);
        // A piece outside the rank's shard is counted as such.
        let mut extra = held.clone();
        let mut stray = extra.iter().find(|p| p.rank == 1).unwrap().clone();
        stray.rank = 0;
        extra.push(stray);
        let rows = per_rank(&declared(true), &shapes(), &extra, &want).unwrap();
        assert_eq!(rows[0].outside, 4);
        assert!(!rows[0].ok(1e-9));
    }

    #[test]
    fn a_replicated_output_reaches_every_rank() {
        // The schedule parallelizes the rows; the output declared replicated is delivered
        // whole to every rank (the contract), and the check sees each rank's copy.
        let c = Compiler::new();
        let text = rowsum("");
        let plan = c
            .compile("rs.mlir", &text, &Schedule::script(SCHED))
            .unwrap();
        let inputs = random_inputs(&plan, 11);
        let reference = c.compile("rs.mlir", &text, &Schedule::default()).unwrap();
        let want = assemble(&reference, &execute_pieces(&reference, &inputs).unwrap());
        let held = execute_pieces(&plan, &inputs).unwrap();
        let rows = per_rank(&declared(false), &shapes(), &held, &want).unwrap();
        assert!(
            rows.iter().all(|h| h.ok(1e-9) && h.declared == 16),
            "{rows:?}"
        );
    }

    #[test]
    fn compare_finds_errors_nonfinite_values_and_keeps_to_the_mask() {
        let want = HashMap::from([("O".to_string(), vec![3.0, 4.0, 0.0, 1.0])]);
        let same = compare(&want, &want, None);
        assert_eq!(
            (same[0].rel_err, same[0].nonfinite, same[0].elements),
            (0.0, 0, 4)
        );
        // ‖(0, 0, 0, 2)‖ / ‖(3, 4, 0, 1)‖ = 2 / sqrt(26).
        let off = HashMap::from([("O".to_string(), vec![3.0, 4.0, 0.0, 3.0])]);
        let e = compare(&off, &want, None)[0].rel_err;
        assert!((e - 2.0 / 26f64.sqrt()).abs() < 1e-15);
        // A masked-out wrong value does not count; a kept NaN does.
        let mask = HashMap::from([("O".to_string(), vec![true, true, true, false])]);
        let m = compare(&off, &want, Some(&mask));
        assert_eq!((m[0].rel_err, m[0].elements), (0.0, 3));
        let nan = HashMap::from([("O".to_string(), vec![f64::NAN, 4.0, 0.0, 1.0])]);
        let n = compare(&nan, &want, Some(&mask));
        assert_eq!((n[0].rel_err, n[0].nonfinite), (f64::INFINITY, 1));
        // A missing or short output fails.
        let short = HashMap::from([("O".to_string(), vec![3.0])]);
        assert_eq!(compare(&short, &want, None)[0].rel_err, f64::INFINITY);
        let none: HashMap<String, Vec<f64>> = HashMap::new();
        assert_eq!(compare(&none, &want, None)[0].rel_err, f64::INFINITY);
    }

    /// One wrong row of 4096 in a 4096 x 4096 output stays inside the GPU's norm-wise 2e-2
    /// (relative error 1/64), and fails on its largest element; rounding noise of 1e-3 on
    /// every element passes both.
    #[test]
    fn one_wrong_row_fails_the_element_bound() {
        let (rows, cols) = (4096usize, 4096usize);
        let want: Vec<f64> = (0..rows * cols)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut got = want.clone();
        // Row 7 left at zero (a tile nothing wrote, say): each element off by |want| = rms,
        // half of rms + |want|.
        for v in &mut got[7 * cols..8 * cols] {
            *v = 0.0;
        }
        let (w, g) = (
            HashMap::from([("C".to_string(), want.clone())]),
            HashMap::from([("C".to_string(), got)]),
        );
        let c = &compare(&g, &w, None)[0];
        assert!((c.rel_err - 1.0 / 64.0).abs() < 1e-12, "{}", c.rel_err);
        assert!(c.rel_err <= 2e-2 && (c.worst - 0.5).abs() < 1e-12);
        assert!(!c.within(2e-2), "{}", c.describe(2e-2));
        let noisy = HashMap::from([(
            "C".to_string(),
            want.iter().map(|v| v * (1.0 + 1e-3)).collect::<Vec<f64>>(),
        )]);
        assert!(compare(&noisy, &w, None)[0].within(2e-2));
        // All zeros: equal passes, any difference fails.
        let z = HashMap::from([("Z".to_string(), vec![0.0; 4])]);
        assert_eq!(compare(&z, &z, None)[0].worst, 0.0);
        let nz = HashMap::from([("Z".to_string(), vec![0.0, 0.0, 1e-30, 0.0])]);
        assert!(!compare(&nz, &z, None)[0].within(2e-2));
    }
}
