//! Attention masks beyond causal (issue 43): packed documents (run-time boundaries, flash-attn's
//! `cu_seqlens`), causal within documents, sliding windows `(left, right)`, the alignment to the
//! documents' ends, cross-attention, forward and backward, under every shipped schedule that
//! takes the operator, on the f64 CPU executor, against the patch's definition computed here
//! pair by pair (independent of `mercury_plan::mask`).
//!
//! Fresh inputs and boundaries every run (the seed is printed on a failure): one document per
//! token, long-tail lengths with documents longer than a shard (and empty ones, and a padding
//! tail that belongs to no document), and hundreds of documents. Lengths never need to divide
//! anything; the sequence itself must still divide into the mesh's shards (a located error
//! says so otherwise: `uneven_sequences_are_refused_with_a_location`).

use mercury_driver::{Compiler, Schedule};
use mercury_plan::Plan;
use mercury_tests::repo;
use std::collections::HashMap;

/// splitmix64: the test's own generator (fresh seed per run, printed on failure).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// One mask: the patch's attributes.
#[derive(Debug, Clone, Copy)]
struct Mask {
    causal: bool,
    window: Option<(i64, i64)>,
    documents: bool,
    lower_right: bool,
}

const HEADS: usize = 8;
const D: usize = 4;

/// The mesh and the sharding of the sequence dimension: `[8]` or `[2, 4]` (both levels).
fn mesh(two_level: bool) -> (&'static str, &'static str) {
    if two_level {
        (
            "commir.mesh @mesh shape [2, 4] names [\"node\", \"gpu\"]",
            "S(0, 1)",
        )
    } else {
        ("commir.mesh @mesh shape [8] names [\"gpu\"]", "S(0)")
    }
}

fn attrs(m: &Mask, cross: bool) -> String {
    let mut a = Vec::new();
    if m.causal {
        a.push("causal = true".to_string());
    }
    if m.documents {
        a.push(if cross {
            "documents = [@Dq, @Dk]".into()
        } else {
            "documents = @Dq".into()
        });
    }
    if let Some((l, r)) = m.window {
        a.push(format!("window = [{l}, {r}]"));
    }
    if m.lower_right {
        a.push("lower_right = true".into());
    }
    format!("{{{}}}", a.join(", "))
}

fn decls(sq: usize, sk: usize, m: &Mask, cross: bool) -> String {
    let mut s = String::new();
    if m.documents {
        s += &format!("  commir.documents @Dq positions {sq}\n");
        if cross {
            s += &format!("  commir.documents @Dk positions {sk}\n");
        }
    }
    s
}

/// The forward operator: o = attention(q, k, v) under `m`, `sq` queries, `sk` keys.
fn forward(sq: usize, sk: usize, m: &Mask, two_level: bool) -> String {
    let (mesh, sh) = mesh(two_level);
    let cross = sq != sk;
    format!(
        "{mesh}
commir.kernel @attention on @mesh {{
  commir.axis @b = 1 spatial
  commir.axis @h = {HEADS} spatial
  commir.axis @i = {sq} spatial
  commir.axis @j = {sk} managed
  commir.buffer @Q : [@b, @h, @i, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @K : [@b, @h, @j, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @V : [@b, @h, @j, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @O : [@b, @h, @i, {D}] f32 out sharding [R, R, {sh}, R]
{}  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}}
",
        decls(sq, sk, m, cross),
        attrs(m, cross)
    )
}

/// The backward operator (as `examples/small/attention_bwd.mlir`, self-attention).
fn backward(s: usize, m: &Mask, two_level: bool) -> String {
    let (mesh, sh) = mesh(two_level);
    let t = "!commir.tile<f32>";
    format!(
        "{mesh}
commir.kernel @attention_bwd on @mesh {{
  commir.axis @b = 1 spatial
  commir.axis @h = {HEADS} spatial
  commir.axis @i = {s} spatial
  commir.axis @j = {s} managed
  commir.buffer @Q : [@b, @h, @i, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @K : [@b, @h, @j, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @V : [@b, @h, @j, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @O : [@b, @h, @i, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @dO : [@b, @h, @i, {D}] f32 in sharding [R, R, {sh}, R]
  commir.buffer @LSE : [@b, @h, @i] f32 in sharding [R, R, {sh}]
  commir.buffer @dQ : [@b, @h, @i, {D}] f32 out sharding [R, R, {sh}, R]
  commir.buffer @dK : [@b, @h, @j, {D}] f32 out sharding [R, R, {sh}, R]
  commir.buffer @dV : [@b, @h, @j, {D}] f32 out sharding [R, R, {sh}, R]
{}  %q = commir.load @Q[@b, @h, @i] : {t}
  %k = commir.load @K[@b, @h, @j] : {t}
  %v = commir.load @V[@b, @h, @j] : {t}
  %o = commir.load @O[@b, @h, @i] : {t}
  %do = commir.load @dO[@b, @h, @i] : {t}
  %lse = commir.load @LSE[@b, @h, @i] : {t}
  %dq, %dk, %dv = commir.patch \"attention_bwd\" (%q, %k, %v, %o, %do, %lse) {} : ({t}, {t}, {t}, {t}, {t}, {t}) -> ({t}, {t}, {t})
  commir.reduce add %dq into @dQ[@b, @h, @i] : {t}
  commir.reduce add %dk into @dK[@b, @h, @j] : {t}
  commir.reduce add %dv into @dV[@b, @h, @j] : {t}
}}
",
        decls(s, s, m, false),
        attrs(m, false)
    )
}

/// `None` (as written), `--shift-shard`, then every shipped schedule script, by name, with its
/// text; the striped ones with blocks of 8 positions (the scripts' 128 fit 32K tokens).
fn schedules() -> Vec<(String, Schedule)> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("examples/schedules"))
        .expect("examples/schedules/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sched"))
        .map(|p| p.file_name().expect("name").to_string_lossy().to_string())
        .collect();
    names.sort();
    let mut out = vec![
        ("none".to_string(), Schedule::default()),
        ("shift-shard".to_string(), Schedule::shift_shard()),
    ];
    for n in names {
        let text = std::fs::read_to_string(repo().join("examples/schedules").join(&n))
            .expect("schedule")
            .replace("striped(0;128)", "striped(0;8)");
        out.push((n, Schedule::script(&text)));
    }
    out
}

/// Document boundaries over `n` positions with `docs` documents: `kind` 0, one token each
/// (`docs` = n); 1, long tail (a few documents, the first longer than a shard, at times empty
/// ones and a padding tail); 2, `docs` random cuts (hundreds; empty documents among them).
fn boundaries(rng: &mut Rng, n: usize, docs: usize, kind: usize) -> Vec<usize> {
    match kind {
        0 => {
            // `docs` documents as even as they come (one token each when docs == n).
            (0..=docs).map(|d| d * n / docs).collect()
        }
        1 => {
            let end = if rng.below(3) == 0 {
                n - rng.below(n / 4)
            } else {
                n
            };
            let first = (n / 2).min(end) + rng.below(end - (n / 2).min(end) + 1);
            let mut cuts = vec![0, first.min(end)];
            for _ in 0..docs.saturating_sub(2) {
                cuts.push(first + rng.below(end - first.min(end) + 1));
            }
            cuts.push(end);
            cuts.sort_unstable();
            cuts.truncate(docs + 1);
            cuts[docs] = end;
            cuts
        }
        _ => {
            let mut cuts: Vec<usize> = (1..docs).map(|_| rng.below(n + 1)).collect();
            cuts.push(0);
            cuts.push(n);
            cuts.sort_unstable();
            cuts
        }
    }
}

/// Whether key `j` is visible to query `i`: the definition (issue 43, flash-attn's varlen
/// `window_size` and alignment), pair by pair.
fn visible(m: &Mask, bq: Option<&[usize]>, bk: Option<&[usize]>, i: usize, j: usize) -> bool {
    let shift = match (bq, bk) {
        (Some(bq), Some(bk)) => {
            let Some(d) = (0..bq.len() - 1).find(|&d| bq[d] <= i && i < bq[d + 1]) else {
                return false;
            };
            if !(bk[d] <= j && j < bk[d + 1]) {
                return false;
            }
            if m.lower_right {
                bk[d + 1] as i64 - bq[d + 1] as i64
            } else {
                bk[d] as i64 - bq[d] as i64
            }
        }
        _ => 0,
    };
    let t = j as i64 - i as i64 - shift;
    (!m.causal || t <= 0)
        && m.window
            .is_none_or(|(l, r)| (l < 0 || t >= -l) && (r < 0 || t <= r))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The forward's o by the definition.
fn forward_ref(
    m: &Mask,
    x: &HashMap<String, Vec<f64>>,
    (sq, sk): (usize, usize),
    b: (Option<&[usize]>, Option<&[usize]>),
) -> Vec<f64> {
    let scale = 1.0 / (D as f64).sqrt();
    let (q, k, v) = (&x["Q"], &x["K"], &x["V"]);
    let mut o = vec![0.0; HEADS * sq * D];
    for h in 0..HEADS {
        for i in 0..sq {
            let qi = &q[(h * sq + i) * D..][..D];
            let seen: Vec<(usize, f64)> = (0..sk)
                .filter(|&j| visible(m, b.0, b.1, i, j))
                .map(|j| (j, scale * dot(qi, &k[(h * sk + j) * D..][..D])))
                .collect();
            let mx = seen.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = seen.iter().map(|s| (s.1 - mx).exp()).sum();
            for (j, s) in seen {
                let p = (s - mx).exp() / z;
                for (y, w) in o[(h * sq + i) * D..][..D]
                    .iter_mut()
                    .zip(&v[(h * sk + j) * D..][..D])
                {
                    *y += p * w;
                }
            }
        }
    }
    o
}

/// The backward's dq, dk, dv by the definition, from its inputs (o, do, lse as given).
fn backward_ref(
    m: &Mask,
    x: &HashMap<String, Vec<f64>>,
    s: usize,
    b: Option<&[usize]>,
) -> [Vec<f64>; 3] {
    let scale = 1.0 / (D as f64).sqrt();
    let (q, k, v, o, d_o, lse) = (&x["Q"], &x["K"], &x["V"], &x["O"], &x["dO"], &x["LSE"]);
    let mut g = [
        vec![0.0; HEADS * s * D],
        vec![0.0; HEADS * s * D],
        vec![0.0; HEADS * s * D],
    ];
    for h in 0..HEADS {
        for i in 0..s {
            let row = |t: &[f64], r: usize| t[(h * s + r) * D..][..D].to_vec();
            let (qi, oi, doi) = (row(q, i), row(o, i), row(d_o, i));
            let delta = dot(&doi, &oi);
            for j in (0..s).filter(|&j| visible(m, b, b, i, j)) {
                let (kj, vj) = (row(k, j), row(v, j));
                let p = (scale * dot(&qi, &kj) - lse[h * s + i]).exp();
                let ds = p * (dot(&doi, &vj) - delta) * scale;
                for c in 0..D {
                    g[0][(h * s + i) * D + c] += ds * kj[c];
                    g[1][(h * s + j) * D + c] += ds * qi[c];
                    g[2][(h * s + j) * D + c] += p * doi[c];
                }
            }
        }
    }
    g
}

/// The largest element error of `got` against `want`, relative to `want`'s rms plus the
/// element; infinite for a non-finite element.
fn error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len().max(1) as f64).sqrt();
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g.is_finite() {
                (g - w).abs() / (rms + w.abs()).max(1e-300)
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

fn compile(name: &str, text: &str, schedule: &Schedule) -> Result<Plan, String> {
    Compiler::new()
        .compile(name, text, schedule)
        .map_err(|d| d.message)
}

fn run(plan: &Plan, inputs: &HashMap<String, Vec<f64>>) -> HashMap<String, Vec<f64>> {
    mercury_runtime::cpu::execute(plan, inputs).unwrap_or_else(|e| panic!("{e}"))
}

fn draw(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.unit()).collect()
}

/// Every forward mask under every schedule that takes it, three batches of boundaries each.
#[test]
fn forward_masks_under_every_schedule_equal_the_definition() {
    let seed = fresh_seed();
    let mut rng = Rng(seed);
    let s = 256; // 32 positions a shard on 8 ranks
    let masks = [
        (
            Mask {
                causal: true,
                window: None,
                documents: true,
                lower_right: false,
            },
            s,
        ),
        (
            Mask {
                causal: false,
                window: None,
                documents: true,
                lower_right: false,
            },
            s,
        ),
        (
            Mask {
                causal: true,
                window: Some((16, 0)),
                documents: false,
                lower_right: false,
            },
            s,
        ),
        (
            Mask {
                causal: false,
                window: Some((5, 7)),
                documents: true,
                lower_right: false,
            },
            s,
        ),
        (
            Mask {
                causal: true,
                window: Some((40, -1)),
                documents: true,
                lower_right: false,
            },
            s,
        ),
        // Cross-attention: 128 queries on 256 keys, documents paired, aligned at their ends.
        (
            Mask {
                causal: true,
                window: Some((24, -1)),
                documents: true,
                lower_right: true,
            },
            128,
        ),
    ];
    let mut ran: HashMap<String, usize> = HashMap::new();
    for (m, sq) in masks {
        let sk = s;
        let texts = [forward(sq, sk, &m, false), forward(sq, sk, &m, true)];
        // Each schedule on the mesh it takes (one level or two), compiled once.
        let plans: Vec<(String, Plan)> = schedules()
            .into_iter()
            .filter_map(|(name, schedule)| {
                let plan = texts
                    .iter()
                    .find_map(|t| compile("masks.mlir", t, &schedule).ok())?;
                Some((name, plan))
            })
            .collect();
        // Three batches: one token (or as near as pairing allows) per document, a long tail,
        // hundreds of documents.
        for kind in 0..3 {
            let docs = match kind {
                0 => sq,
                1 => 1 + rng.below(6),
                _ => 100 + rng.below(sq - 100),
            };
            let bq = boundaries(&mut rng, sq, docs, kind);
            let bk = if sq == sk {
                bq.clone()
            } else {
                boundaries(&mut rng, sk, docs, kind)
            };
            let mut x = HashMap::new();
            x.insert("Q".to_string(), draw(&mut rng, HEADS * sq * D));
            x.insert("K".to_string(), draw(&mut rng, HEADS * sk * D));
            x.insert("V".to_string(), draw(&mut rng, HEADS * sk * D));
            let docs = m.documents.then_some((bq.as_slice(), bk.as_slice()));
            x.insert("Dq".into(), bq.iter().map(|&b| b as f64).collect());
            if sq != sk {
                x.insert("Dk".into(), bk.iter().map(|&b| b as f64).collect());
            }
            let want = forward_ref(&m, &x, (sq, sk), (docs.map(|d| d.0), docs.map(|d| d.1)));
            for (name, plan) in &plans {
                let mut inputs = x.clone();
                if !m.documents {
                    inputs.retain(|k, _| !k.starts_with('D'));
                }
                let got = run(plan, &inputs);
                assert_close(&got["O"], &want, || {
                    format!("seed {seed}: {m:?} sq {sq} under {name}, boundaries {bq:?} / {bk:?}")
                });
                *ran.entry(name.clone()).or_default() += 1;
            }
        }
    }
    assert_ran(
        &ran,
        &[
            "none",
            "shift-shard",
            "ring_attention.sched",
            "zigzag_ring.sched",
            "striped_ring.sched",
            "tree_attention.sched",
            "context_parallel.sched",
            "ulysses.sched",
            "usp.sched",
            "loongtrain.sched",
        ],
        15,
        18,
        seed,
    );
}

/// Holds a plan's output to the definition's (relative error at most 1e-9).
fn assert_close(got: &[f64], want: &[f64], what: impl FnOnce() -> String) {
    let e = error(got, want);
    assert!(e <= 1e-9, "{}: error {e:e}", what());
}

/// Every schedule of `must` ran at least `least` of the `of` cases.
fn assert_ran(ran: &HashMap<String, usize>, must: &[&str], least: usize, of: usize, seed: u64) {
    for name in must {
        assert!(
            ran.get(*name).is_some_and(|n| *n >= least),
            "{name} ran {:?} times of {of} (seed {seed}); ran: {ran:?}",
            ran.get(*name)
        );
    }
}

/// Document masks of the backward tests: causal, causal with a window, a two-sided window.
fn document_masks() -> [Mask; 3] {
    let m = |causal, window| Mask {
        causal,
        window,
        documents: true,
        lower_right: false,
    };
    [
        m(true, None),
        m(true, Some((16, 0))),
        m(false, Some((3, 3))),
    ]
}

/// The backward under every backward schedule, three batches of boundaries each.
#[test]
fn backward_masks_under_every_schedule_equal_the_definition() {
    let seed = fresh_seed() ^ 0xb0d;
    let mut rng = Rng(seed);
    let s = 256;
    let masks = document_masks();
    let mut ran: HashMap<String, usize> = HashMap::new();
    for m in masks {
        let texts = [backward(s, &m, false), backward(s, &m, true)];
        let plans: Vec<(String, Plan)> = schedules()
            .into_iter()
            .filter(|(name, _)| {
                name == "none" || name == "shift-shard" || name.ends_with("_bwd.sched")
            })
            .filter_map(|(name, schedule)| {
                let plan = texts
                    .iter()
                    .find_map(|t| compile("masks_bwd.mlir", t, &schedule).ok())?;
                Some((name, plan))
            })
            .collect();
        for kind in 0..3 {
            let docs = match kind {
                0 => s,
                1 => 1 + rng.below(6),
                _ => 100 + rng.below(s - 100),
            };
            let b = boundaries(&mut rng, s, docs, kind);
            let mut x = HashMap::new();
            for name in ["Q", "K", "V", "O", "dO"] {
                x.insert(name.to_string(), draw(&mut rng, HEADS * s * D));
            }
            x.insert("LSE".into(), draw(&mut rng, HEADS * s));
            x.insert("Dq".into(), b.iter().map(|&v| v as f64).collect());
            let want = backward_ref(&m, &x, s, Some(&b));
            for (name, plan) in &plans {
                let got = run(plan, &x);
                for (out, want) in ["dQ", "dK", "dV"].iter().zip(&want) {
                    assert_close(&got[*out], want, || {
                        format!("seed {seed}: {m:?} under {name}, {out}, boundaries {b:?}")
                    });
                }
                *ran.entry(name.clone()).or_default() += 1;
            }
        }
    }
    assert_ran(
        &ran,
        &[
            "none",
            "shift-shard",
            "ring_attention_bwd.sched",
            "zigzag_ring_bwd.sched",
            "striped_ring_bwd.sched",
            "ulysses_bwd.sched",
            "usp_bwd.sched",
            "loongtrain_bwd.sched",
        ],
        9,
        9,
        seed,
    );
}

/// Shards declared zigzag over chunks (`S(zigzag(0, 4))`: 4 rounds of 16 chunks over 8 ranks,
/// the layout that balances packed batches of a few long documents): forward and backward,
/// documents with causal and windowed masks, under every schedule that takes the declared
/// placement, equal the definition; the ring, tree and context-parallel schedules and
/// `shift-shard` must take it (the zigzag and striped rings reshard contiguous inputs).
#[test]
fn chunked_zigzag_shards_under_every_schedule_equal_the_definition() {
    let seed = fresh_seed() ^ 0x21c;
    let mut rng = Rng(seed);
    let s = 256;
    let chunked = |t: String| t.replace("S(0)", "S(zigzag(0, 4))");
    let masks = document_masks();
    let mut ran: HashMap<String, usize> = HashMap::new();
    for m in masks {
        let fwd = chunked(forward(s, s, &m, false));
        let bwd = chunked(backward(s, &m, false));
        assert!(fwd.contains("S(zigzag(0, 4))") && bwd.contains("S(zigzag(0, 4))"));
        let plans: Vec<(String, bool, Plan)> = schedules()
            .into_iter()
            .filter_map(|(name, schedule)| {
                let backward = name.ends_with("_bwd.sched");
                let text = if backward { &bwd } else { &fwd };
                let plan = compile("chunked.mlir", text, &schedule).ok()?;
                Some((name, backward, plan))
            })
            .chain(
                compile("chunked_bwd.mlir", &bwd, &Schedule::shift_shard())
                    .ok()
                    .map(|p| ("shift-shard (backward)".to_string(), true, p)),
            )
            .collect();
        for kind in 1..3 {
            let docs = if kind == 1 {
                1 + rng.below(6)
            } else {
                100 + rng.below(s - 100)
            };
            let b = boundaries(&mut rng, s, docs, kind);
            let mut x = HashMap::new();
            for name in ["Q", "K", "V", "O", "dO"] {
                x.insert(name.to_string(), draw(&mut rng, HEADS * s * D));
            }
            x.insert("LSE".into(), draw(&mut rng, HEADS * s));
            x.insert("Dq".into(), b.iter().map(|&v| v as f64).collect());
            let want_o = forward_ref(&m, &x, (s, s), (Some(&b), Some(&b)));
            let want_bwd = backward_ref(&m, &x, s, Some(&b));
            for (name, backward, plan) in &plans {
                let mut inputs = x.clone();
                if *backward {
                    let got = run(plan, &inputs);
                    for (out, want) in ["dQ", "dK", "dV"].iter().zip(&want_bwd) {
                        assert_close(&got[*out], want, || {
                            format!("seed {seed}: {m:?} under {name}, {out}, boundaries {b:?}")
                        });
                    }
                } else {
                    inputs.retain(|k, _| ["Q", "K", "V", "Dq"].contains(&k.as_str()));
                    let got = run(plan, &inputs);
                    assert_close(&got["O"], &want_o, || {
                        format!("seed {seed}: {m:?} under {name}, boundaries {b:?}")
                    });
                }
                *ran.entry(name.clone()).or_default() += 1;
            }
        }
    }
    assert_ran(
        &ran,
        &[
            "none",
            "shift-shard",
            "shift-shard (backward)",
            "ring_attention.sched",
            "ring_attention_bwd.sched",
            "ring_flash_attn_bwd.sched",
            "loongtrain_bwd.sched",
            "context_parallel.sched",
            "tree_attention.sched",
        ],
        6,
        6,
        seed,
    );
}

/// A sequence that does not divide into the mesh's shards is refused with a located error,
/// never computed on uneven pieces wrongly; boundaries that are not prefix sums are refused by
/// the executor, naming the entry.
#[test]
fn uneven_sequences_and_bad_boundaries_are_refused() {
    let m = Mask {
        causal: true,
        window: None,
        documents: true,
        lower_right: false,
    };
    let text = forward(250, 250, &m, false);
    let e = Compiler::new()
        .compile("uneven.mlir", &text, &Schedule::shift_shard())
        .expect_err("250 positions on 8 shards");
    assert!(
        e.message.contains("does not divide into 8 shards"),
        "{}",
        e.message
    );
    assert!(
        matches!(e.loc, mercury_ir::Location::File { line, .. } if line > 0),
        "{e:?}"
    );
    let plan = compile(
        "masks.mlir",
        &forward(64, 64, &m, false),
        &Schedule::shift_shard(),
    )
    .expect("64 positions");
    let mut rng = Rng(fresh_seed());
    let mut x = HashMap::new();
    for n in ["Q", "K", "V"] {
        x.insert(n.to_string(), draw(&mut rng, HEADS * 64 * D));
    }
    for (b, says) in [
        (vec![0.0, 40.0, 30.0, 64.0], "decrease at entry 2"),
        (vec![0.0, 65.0], "past the 64 positions"),
        (vec![1.0, 64.0], "start at 1"),
        (vec![0.0, 2.5, 64.0], "whole number"),
    ] {
        x.insert("Dq".into(), b);
        let e = mercury_runtime::cpu::execute(&plan, &x).expect_err("bad boundaries");
        assert!(e.to_string().contains(says), "{e}");
    }
    x.remove("Dq");
    let e = mercury_runtime::cpu::execute(&plan, &x).expect_err("no boundaries");
    assert!(e.to_string().contains("'Dq': missing"), "{e}");
}
