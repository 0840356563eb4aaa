//! Small instances of the example operators (`examples/*.mlir`) for the schedule target:
//! multi-head, grouped-query and causal attention (patch form), naive attention written with
//! compute ops (causal or not, MHA or GQA), the attention backward, the all-gather GEMM and the GEMM reduce-scatter,
//! the MLP (two matmuls, GeLU, a temp buffer) and the weighted sum. Shapes, the mesh (1 to 3
//! levels) and each input's and output's placement (replicated, or split over every level in
//! contiguous blocks, zigzag or striped) are drawn at random; extents are kept small so that the
//! CPU executor runs a case in milliseconds.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The operator families, after the examples they scale down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `examples/attention.mlir` / `attention_causal.mlir` (`causal`).
    Attention,
    /// `examples/attention_gqa.mlir` (grouped-query heads), causal or not.
    AttentionGqa,
    /// `examples/attention_naive.mlir`: attention written with compute ops.
    AttentionNaive,
    /// `examples/attention_bwd.mlir`: the attention backward (patch form), causal or not,
    /// multi-head or grouped-query, the value head dim sometimes another.
    AttentionBwd,
    /// `examples/attention_bwd_naive.mlir`: the backward written with compute ops (multi-head,
    /// causal or not, scaled or not).
    AttentionBwdNaive,
    /// `examples/ag_gemm.mlir`: row-sharded A, all-gather before the GEMM.
    AgGemm,
    /// `examples/gemm_rs.mlir`: contraction-sharded, reduce-scatter after the GEMM.
    GemmRs,
    /// `examples/mlp.mlir`: GEMM, GeLU, cast, temp buffer, GEMM.
    Mlp,
    /// `examples/weighted_sum.mlir`: a matrix-vector product.
    WeightedSum,
}

/// Every family, for draws and reports.
pub const FAMILIES: [Family; 9] = [
    Family::Attention,
    Family::AttentionGqa,
    Family::AttentionNaive,
    Family::AttentionBwd,
    Family::AttentionBwdNaive,
    Family::AgGemm,
    Family::GemmRs,
    Family::Mlp,
    Family::WeightedSum,
];

/// A drawn operator: its family, whether it is causal attention, and its CommIR text.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The example it scales down.
    pub family: Family,
    /// Causal attention (masked).
    pub causal: bool,
    /// The module: one `commir.mesh` and one `commir.kernel`.
    pub text: String,
}

/// The mesh levels of a drawn mesh.
fn draw_mesh(rng: &mut ChaCha8Rng) -> Vec<usize> {
    [
        vec![2],
        vec![2],
        vec![4],
        vec![3],
        vec![2, 2],
        vec![2, 2],
        vec![2, 4],
        vec![2, 2, 2],
        vec![1, 2],
    ]
    .choose(rng)
    .unwrap()
    .clone()
}

/// `S(...)` of one dimension of `size` over every level of `mesh`: contiguous blocks, zigzag
/// (one round per level, or chunked on one level) or striped (on one level); contiguous when the draw does not
/// divide `size`. `R` with probability one half.
fn placement(rng: &mut ChaCha8Rng, mesh: &[usize], size: usize) -> String {
    if rng.gen_bool(0.45) {
        return "R".into();
    }
    let n: usize = mesh.iter().product();
    let levels: Vec<usize> = (0..mesh.len()).collect();
    let plain = format!(
        "S({})",
        levels
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    match rng.gen_range(0..6) {
        // Zigzag on every level: each level halves its part into head and tail chunks.
        0 | 1 => {
            let mut part = size;
            let mut ok = true;
            for m in mesh {
                ok &= part.is_multiple_of(2 * m);
                part /= m.max(&1);
            }
            if ok {
                let e: Vec<String> = levels.iter().map(|l| format!("zigzag({l})")).collect();
                return format!("S({})", e.join(", "));
            }
            plain
        }
        2 => {
            let b = *[1usize, 2].choose(rng).unwrap();
            if size.is_multiple_of(n * b) && mesh.len() == 1 {
                format!("S(striped(0, {b}))")
            } else {
                plain
            }
        }
        // Zigzag over chunks (several rounds) on one level.
        3 => {
            let c = *[1usize, 2].choose(rng).unwrap();
            if size.is_multiple_of(2 * n * c) && mesh.len() == 1 {
                format!("S(zigzag(0, {c}))")
            } else {
                plain
            }
        }
        _ => plain,
    }
}

fn mesh_line(mesh: &[usize]) -> String {
    let s: Vec<String> = mesh.iter().map(|m| m.to_string()).collect();
    let names: Vec<String> = (0..mesh.len()).map(|l| format!("\"l{l}\"")).collect();
    format!(
        "commir.mesh @mesh shape [{}] names [{}]\n",
        s.join(", "),
        names.join(", ")
    )
}

/// A random small operator of a random family.
pub fn draw(rng: &mut ChaCha8Rng) -> Operator {
    let family = *FAMILIES.choose(rng).unwrap();
    draw_family(rng, family)
}

/// A random small operator of `family`.
pub fn draw_family(rng: &mut ChaCha8Rng, family: Family) -> Operator {
    let mesh = draw_mesh(rng);
    let n: usize = mesh.iter().product();
    let mut causal = false;
    let dt = *["bf16", "f32", "f64"].choose(rng).unwrap();
    let text = match family {
        Family::Attention | Family::AttentionGqa | Family::AttentionNaive => {
            let gqa = family == Family::AttentionGqa
                || (family == Family::AttentionNaive && rng.gen_bool(0.3));
            causal = rng.gen_bool(0.5);
            let s = n * 2 * rng.gen_range(1..=2);
            let b = *[1usize, 2].choose(rng).unwrap();
            let (hk, g) = if gqa {
                (*[1usize, 2].choose(rng).unwrap(), 2)
            } else {
                (*[1usize, 2, 4].choose(rng).unwrap(), 1)
            };
            let d = *[2usize, 4].choose(rng).unwrap();
            let (heads, qidx, gaxis) = if gqa {
                (
                    "@hk * @g",
                    "@b, @hk, @g, @i",
                    format!("  commir.axis @g = {g} spatial\n"),
                )
            } else {
                ("@hk", "@b, @hk, @i", String::new())
            };
            let pq = placement(rng, &mesh, s);
            let pk = if rng.gen_bool(0.7) {
                pq.clone()
            } else {
                placement(rng, &mesh, s)
            };
            let po = if rng.gen_bool(0.7) {
                pq.clone()
            } else {
                placement(rng, &mesh, s)
            };
            let min = if rng.gen_bool(0.2) { " min 2" } else { "" };
            let head = format!(
                "{}commir.kernel @attention on @mesh {{\n  commir.axis @b = {b} spatial\n  commir.axis @hk = {hk} spatial\n{gaxis}  commir.axis @i = {s} spatial{min}\n  commir.axis @j = {s} managed{min}\n  commir.buffer @Q : [@b, {heads}, @i, {d}] {dt} in sharding [R, R, {pq}, R]\n  commir.buffer @K : [@b, @hk, @j, {d}] {dt} in sharding [R, R, {pk}, R]\n  commir.buffer @V : [@b, @hk, @j, {d}] {dt} in sharding [R, R, {pk}, R]\n  commir.buffer @O : [@b, {heads}, @i, {d}] {dt} out sharding [R, R, {po}, R]\n  %q = commir.load @Q[{qidx}] : !commir.tile<{dt}>\n  %k = commir.load @K[@b, @hk, @j] : !commir.tile<{dt}>\n  %v = commir.load @V[@b, @hk, @j] : !commir.tile<{dt}>\n",
                mesh_line(&mesh)
            );
            let t = |x: &str| format!("!commir.tile<{x}>");
            let body = if family == Family::AttentionNaive {
                let scale = 1.0 / (d as f64).sqrt();
                let (sv, mask) = if causal {
                    (
                        "%sm",
                        format!("  %sm = commir.mask causal %s : {}\n", t("f32")),
                    )
                } else {
                    ("%s", String::new())
                };
                format!(
                    "  %s = commir.matmul %q, %k transpose_b : ({0}, {0}) -> {1}\n{mask}  %t = commir.scale {sv} by {scale:?} : {1}\n  %m = commir.row_reduce max %t : {1}\n  %d = commir.binary sub %t, %m : {1}\n  %p = commir.unary exp %d : {1}\n  %l = commir.row_reduce sum %p : {1}\n  %pb = commir.cast %p : {1} to {0}\n  %u = commir.matmul %pb, %v : ({0}, {0}) -> {1}\n  %o = commir.binary div %u, %l : {1}\n  %ll = commir.unary log %l : {1}\n  %lse = commir.binary add %m, %ll : {1}\n  commir.reduce lse_merge %o, %lse into @O[{qidx}] : {1}, {1}\n}}\n",
                    t(dt),
                    t("f32")
                )
            } else {
                format!(
                    "  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {{causal = {causal}}} : ({0}, {0}, {0}) -> ({1}, {1})\n  commir.reduce lse_merge %o, %lse into @O[{qidx}] : {1}, {1}\n}}\n",
                    t(dt),
                    t("f32")
                )
            };
            head + &body
        }
        Family::AttentionBwd | Family::AttentionBwdNaive => {
            let naive = family == Family::AttentionBwdNaive;
            // The naive body casts nothing: 16-bit tiles would need casts before its matmuls.
            let dt = if naive && dt == "bf16" { "f32" } else { dt };
            causal = rng.gen_bool(0.5);
            let s = n * 2 * rng.gen_range(1..=2);
            let b = *[1usize, 2].choose(rng).unwrap();
            let (hk, g) = if !naive && rng.gen_bool(0.4) {
                (*[1usize, 2].choose(rng).unwrap(), 2)
            } else {
                (*[1usize, 2, 4].choose(rng).unwrap(), 1)
            };
            let d = *[2usize, 4].choose(rng).unwrap();
            let dv = if rng.gen_bool(0.3) { d + 2 } else { d };
            let (heads, qidx, gaxis) = if g > 1 {
                (
                    "@hk * @g",
                    "@b, @hk, @g, @i",
                    format!("  commir.axis @g = {g} spatial\n"),
                )
            } else {
                ("@hk", "@b, @hk, @i", String::new())
            };
            // Query-side buffers (Q, O, dO, LSE, dQ) and key-side ones (K, V, dK, dV): mostly
            // one placement per side, sometimes one per buffer.
            let pq = placement(rng, &mesh, s);
            let pk = if rng.gen_bool(0.6) {
                pq.clone()
            } else {
                placement(rng, &mesh, s)
            };
            let mut side = |p: &String| {
                if rng.gen_bool(0.8) {
                    p.clone()
                } else {
                    placement(rng, &mesh, s)
                }
            };
            let lt = if dt == "f64" { "f64" } else { "f32" };
            let buf = |name: &str, dims: String, t: &str, role: &str, p: String| {
                let rest = if dims.matches(',').count() == 3 {
                    ", R"
                } else {
                    ""
                };
                format!(
                    "  commir.buffer @{name} : [{dims}] {t} {role} sharding [R, R, {p}{rest}]\n"
                )
            };
            let mut text = format!(
                "{}commir.kernel @attention_bwd on @mesh {{\n  commir.axis @b = {b} spatial\n  commir.axis @hk = {hk} spatial\n{gaxis}  commir.axis @i = {s} spatial\n  commir.axis @j = {s} managed\n",
                mesh_line(&mesh)
            );
            for (name, dims, t, role, p) in [
                ("Q", format!("@b, {heads}, @i, {d}"), dt, "in", side(&pq)),
                ("K", format!("@b, @hk, @j, {d}"), dt, "in", side(&pk)),
                ("V", format!("@b, @hk, @j, {dv}"), dt, "in", side(&pk)),
                ("O", format!("@b, {heads}, @i, {dv}"), dt, "in", side(&pq)),
                ("dO", format!("@b, {heads}, @i, {dv}"), dt, "in", side(&pq)),
                ("LSE", format!("@b, {heads}, @i"), lt, "in", side(&pq)),
                ("dQ", format!("@b, {heads}, @i, {d}"), dt, "out", side(&pq)),
                ("dK", format!("@b, @hk, @j, {d}"), dt, "out", side(&pk)),
                ("dV", format!("@b, @hk, @j, {dv}"), dt, "out", side(&pk)),
            ] {
                text += &buf(name, dims, t, role, p);
            }
            let (t, l, f) = (
                format!("!commir.tile<{dt}>"),
                format!("!commir.tile<{lt}>"),
                "!commir.tile<f32>",
            );
            text += &format!(
                "  %q = commir.load @Q[{qidx}] : {t}\n  %k = commir.load @K[@b, @hk, @j] : {t}\n  %v = commir.load @V[@b, @hk, @j] : {t}\n  %o = commir.load @O[{qidx}] : {t}\n  %do = commir.load @dO[{qidx}] : {t}\n  %lse = commir.load @LSE[{qidx}] : {l}\n"
            );
            let f = if naive { t.as_str() } else { f };
            if naive {
                // The scores scaled (by 1/sqrt(d), or 0.5) and masked, or neither.
                let c = *[1.0 / (d as f64).sqrt(), 0.5].choose(rng).unwrap();
                let scaled = rng.gen_bool(0.7);
                let mut sv = "%s".to_string();
                if scaled {
                    text += &format!("  %sc = commir.scale %s by {c:?} : {t}\n");
                    sv = "%sc".into();
                }
                if causal {
                    text += &format!("  %sm = commir.mask causal {sv} : {t}\n");
                    sv = "%sm".into();
                }
                let ds = if scaled {
                    format!("  %dsc = commir.scale %ds by {c:?} : {t}\n")
                } else {
                    format!("  %dsc = commir.scale %ds by 1.0 : {t}\n")
                };
                text = text.replacen(
                    &format!("  %lse = commir.load @LSE[{qidx}] : {l}\n"),
                    &format!("  %lse = commir.load @LSE[{qidx}] : {l}\n  %s = commir.matmul %q, %k transpose_b : ({t}, {t}) -> {t}\n"),
                    1,
                );
                text += &format!(
                    "  %z = commir.binary sub {sv}, %lse : {t}\n  %p = commir.unary exp %z : {t}\n  %dv = commir.matmul %p, %do transpose_a : ({t}, {t}) -> {t}\n  %dp = commir.matmul %do, %v transpose_b : ({t}, {t}) -> {t}\n  %od = commir.binary mul %do, %o : {t}\n  %dd = commir.row_reduce sum %od : {t}\n  %dpd = commir.binary sub %dp, %dd : {t}\n  %ds = commir.binary mul %p, %dpd : {t}\n{ds}  %dq = commir.matmul %dsc, %k : ({t}, {t}) -> {t}\n  %dk = commir.matmul %dsc, %q transpose_a : ({t}, {t}) -> {t}\n"
                );
            } else {
                text += &format!(
                    "  %dq, %dk, %dv = commir.patch \"attention_bwd\" (%q, %k, %v, %o, %do, %lse) {{causal = {causal}}} : ({t}, {t}, {t}, {t}, {t}, {l}) -> ({f}, {f}, {f})\n"
                );
            }
            text += &format!(
                "  commir.reduce add %dq into @dQ[{qidx}] : {f}\n  commir.reduce add %dk into @dK[@b, @hk, @j] : {f}\n  commir.reduce add %dv into @dV[@b, @hk, @j] : {f}\n}}\n"
            );
            text
        }
        Family::AgGemm | Family::GemmRs => {
            let (m, k, nn) = (
                n * rng.gen_range(1..=2),
                n * rng.gen_range(1..=2),
                n * rng.gen_range(1..=2),
            );
            // The example's placements, or random ones.
            let (pa, pb, pc) = if rng.gen_bool(0.5) {
                let s = |l: &[usize]| {
                    format!(
                        "S({})",
                        l.iter()
                            .map(|x| x.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                let all: Vec<usize> = (0..mesh.len()).collect();
                let sh = s(&all);
                if family == Family::AgGemm {
                    (
                        format!("[{sh}, R]"),
                        format!("[R, {sh}]"),
                        format!("[R, {sh}]"),
                    )
                } else {
                    (
                        format!("[R, {sh}]"),
                        format!("[{sh}, R]"),
                        format!("[{sh}, R]"),
                    )
                }
            } else {
                let two = |rng: &mut ChaCha8Rng, a: usize, b: usize| {
                    if rng.gen_bool(0.5) {
                        format!("[{}, R]", placement(rng, &mesh, a))
                    } else {
                        format!("[R, {}]", placement(rng, &mesh, b))
                    }
                };
                (two(rng, m, k), two(rng, k, nn), two(rng, m, nn))
            };
            let name = if family == Family::AgGemm {
                "ag_gemm"
            } else {
                "gemm_rs"
            };
            format!(
                "{}commir.kernel @{name} on @mesh {{\n  commir.axis @m = {m} spatial\n  commir.axis @k = {k} managed\n  commir.axis @n = {nn} spatial\n  commir.buffer @A : [@m, @k] {dt} in sharding {pa}\n  commir.buffer @B : [@k, @n] {dt} in sharding {pb}\n  commir.buffer @C : [@m, @n] {dt} out sharding {pc}\n  %a = commir.load @A[@m, @k] : !commir.tile<{dt}>\n  %b = commir.load @B[@k, @n] : !commir.tile<{dt}>\n  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<{dt}>, !commir.tile<{dt}>) -> !commir.tile<f32>\n  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>\n}}\n",
                mesh_line(&mesh)
            )
        }
        Family::Mlp => {
            let (m, d, f, e) = (
                n * rng.gen_range(1..=2),
                n * rng.gen_range(1..=2),
                n * rng.gen_range(1..=3),
                n * rng.gen_range(1..=2),
            );
            let sh = format!(
                "S({})",
                (0..mesh.len())
                    .map(|l| l.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let (px, pw1, pw2, py) = if rng.gen_bool(0.5) {
                (
                    format!("[{sh}, R]"),
                    format!("[R, {sh}]"),
                    format!("[{sh}, R]"),
                    format!("[{sh}, R]"),
                )
            } else {
                (
                    format!("[{}, R]", placement(rng, &mesh, m)),
                    format!("[R, {}]", placement(rng, &mesh, f)),
                    format!("[{}, R]", placement(rng, &mesh, f)),
                    format!("[{}, R]", placement(rng, &mesh, m)),
                )
            };
            let act = *["gelu", "silu"].choose(rng).unwrap();
            format!(
                "{}commir.kernel @mlp on @mesh {{\n  commir.axis @m = {m} spatial\n  commir.axis @d = {d} managed\n  commir.axis @f = {f} managed\n  commir.axis @e = {e} spatial\n  commir.buffer @X : [@m, @d] {dt} in sharding {px}\n  commir.buffer @W1 : [@d, @f] {dt} in sharding {pw1}\n  commir.buffer @H : [@m, @f] {dt} temp\n  commir.buffer @W2 : [@f, @e] {dt} in sharding {pw2}\n  commir.buffer @Y : [@m, @e] {dt} out sharding {py}\n  %x = commir.load @X[@m, @d] : !commir.tile<{dt}>\n  %w1 = commir.load @W1[@d, @f] : !commir.tile<{dt}>\n  %a = commir.matmul %x, %w1 : (!commir.tile<{dt}>, !commir.tile<{dt}>) -> !commir.tile<f32>\n  %g = commir.unary {act} %a : !commir.tile<f32>\n  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<{dt}>\n  commir.store %gb into @H[@m, @f] : !commir.tile<{dt}>\n  %h = commir.load @H[@m, @f] : !commir.tile<{dt}>\n  %w2 = commir.load @W2[@f, @e] : !commir.tile<{dt}>\n  %y = commir.matmul %h, %w2 : (!commir.tile<{dt}>, !commir.tile<{dt}>) -> !commir.tile<f32>\n  commir.reduce add %y into @Y[@m, @e] : !commir.tile<f32>\n}}\n",
                mesh_line(&mesh)
            )
        }
        Family::WeightedSum => {
            let (i, j) = (n * 2 * rng.gen_range(1..=2), n * rng.gen_range(1..=2));
            let pa = placement(rng, &mesh, i);
            let pc = placement(rng, &mesh, i);
            format!(
                "{}commir.kernel @weighted_sum on @mesh {{\n  commir.axis @i = {i} spatial\n  commir.axis @j = {j} managed\n  commir.buffer @A : [@i, @j] {dt} in sharding [{pa}, R]\n  commir.buffer @B : [@j] {dt} in\n  commir.buffer @C : [@i] {dt} out sharding [{pc}]\n  %a = commir.load @A[@i, @j] : !commir.tile<{dt}>\n  %b = commir.load @B[@j] : !commir.tile<{dt}>\n  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<{dt}>, !commir.tile<{dt}>) -> !commir.tile<f32>\n  commir.reduce add %c into @C[@i] : !commir.tile<f32>\n}}\n",
                mesh_line(&mesh)
            )
        }
    };
    Operator {
        family,
        causal,
        text,
    }
}
