//! `commir.matmul` over both operands' batch dimensions: rows of every batch entry times
//! per-head weights (`[@b, @i, @e] x [@h, @e, @d] -> [@b, @h, @i, @d]`, the QKV projection of a
//! layer at batch > 1), unscheduled and under `shift-shard` and a head-parallel schedule, equal
//! to the definition computed here in f64 on fresh inputs; the CUDA executor refuses it.

use mercury_driver::{Compiler, Schedule};
use std::collections::HashMap;

const B: usize = 2;
const H: usize = 4;
const I: usize = 16;
const E: usize = 6;
const D: usize = 3;

fn kernel(transpose_b: bool) -> String {
    let (w, attr) = if transpose_b {
        (format!("[@h, {D}, @e]"), " transpose_b")
    } else {
        (format!("[@h, @e, {D}]"), "")
    };
    format!(
        "commir.mesh @mesh shape [4] names [\"gpu\"]
commir.kernel @proj on @mesh {{
  commir.axis @b = {B} spatial
  commir.axis @h = {H} spatial
  commir.axis @i = {I} spatial
  commir.axis @e = {E} managed
  commir.buffer @X : [@b, @i, @e] f32 in sharding [R, S(0), R]
  commir.buffer @W : {w} f32 in sharding [R, R, R]
  commir.buffer @Q : [@b, @h, @i, {D}] f32 out sharding [R, R, S(0), R]
  %x = commir.load @X[@b, @i, @e] : !commir.tile<f32>
  %w = commir.load @W[@h, @e] : !commir.tile<f32>
  %q = commir.matmul %x, %w{attr} : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.store %q into @Q[@b, @h, @i] : !commir.tile<f32>
}}
"
    )
}

/// The kernel's body inside hand-written loops over the axes `over` names (`b`, `h`), so the
/// looped operands' batch dimensions are one position of their axis (`1 at [@h]`).
fn looped_over(text: &str, over: &str) -> String {
    let (head, body) = text.split_at(text.find("  %x = ").expect("the body"));
    let body = body.trim_end().strip_suffix('}').expect("the kernel's end");
    let mut body: String = body.lines().map(|l| format!("  {l}\n")).collect();
    for a in over.chars().rev() {
        body = format!("  commir.for @{a} {{\n{body}  }}\n");
    }
    if over.is_empty() {
        return text.to_string();
    }
    format!("{head}{body}}}\n")
}

fn fresh(n: usize, seed: &mut u64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn rows_of_every_batch_entry_times_per_head_weights() {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let start = seed;
    for (transpose_b, looped) in [
        (false, ""),
        (true, ""),
        (false, "h"),
        (false, "b"),
        (true, "bh"),
    ] {
        let text = looped_over(&kernel(transpose_b), looped);
        let x = fresh(B * I * E, &mut seed);
        let w = fresh(H * E * D, &mut seed);
        // Q[b, h, i, d] = sum_e X[b, i, e] W[h, e, d] (W[h, d, e] transposed).
        let mut want = vec![0.0; B * H * I * D];
        for b in 0..B {
            for h in 0..H {
                for i in 0..I {
                    for d in 0..D {
                        want[((b * H + h) * I + i) * D + d] = (0..E)
                            .map(|e| {
                                let wv = if transpose_b {
                                    w[(h * D + d) * E + e]
                                } else {
                                    w[(h * E + e) * D + d]
                                };
                                x[(b * I + i) * E + e] * wv
                            })
                            .sum();
                    }
                }
            }
        }
        let inputs = HashMap::from([("X".to_string(), x), ("W".to_string(), w)]);
        for (name, schedule) in [
            ("none", Schedule::default()),
            ("shift-shard", Schedule::shift_shard()),
            (
                "head-parallel",
                Schedule::script(
                    "tile{axis=h factor=4 outer=h0 inner=h_t}\nparallelize{axis=h0 level=0 shard=false}\n",
                ),
            ),
            // One batch entry and one head per block on both sides (data x tensor parallel).
            (
                "batch and heads in blocks of one",
                Schedule::script(
                    "tile{axis=b factor=2 outer=b0 inner=b_t}\ntile{axis=h factor=4 outer=h0 inner=h_t}\nparallelize{axis=h0 level=0 shard=false}\n",
                ),
            ),
        ]
        .into_iter()
        .filter(|(name, _)| looped.is_empty() || *name == "none")
        {
            let plan = Compiler::new()
                .compile("proj.mlir", &text, &schedule)
                .unwrap_or_else(|d| panic!("{name}: {}", d.message));
            let got = mercury_runtime::cpu::execute(&plan, &inputs)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let e = got["Q"]
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max);
            assert!(
                e <= 1e-12,
                "{name}, transpose_b {transpose_b}, loops over {looped:?} (seed {start}): max error {e:e}"
            );
        }
    }
}

/// Operands whose batch dimensions share an axis but do not line up are still refused (the
/// product over both applies only to disjoint axes), looped or not.
#[test]
fn batch_dimensions_sharing_an_axis_out_of_line_are_refused() {
    let text = kernel(false)
        .replace(
            "commir.buffer @W : [@h, @e, 3] f32 in sharding [R, R, R]",
            "commir.buffer @W : [@b, @h, @e, 3] f32 in sharding [R, R, R, R]",
        )
        .replace(
            "%w = commir.load @W[@h, @e]",
            "%w = commir.load @W[@b, @h, @e]",
        );
    // Also when a loop picks one position of the shared axis on both sides.
    for text in [text.clone(), looped_over(&text, "b")] {
        let e = Compiler::new()
            .compile("proj.mlir", &text, &Schedule::default())
            .expect_err("mixed batch axes");
        assert!(e.message.contains("batch dimension"), "{}", e.message);
    }
}
