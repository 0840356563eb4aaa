use super::*;
use crate::cuda::ops::masked::tests::{block, random_docs};
use crate::cuda::ops::row_bounds;
use mercury_plan::mask::{Boundaries, MaskCx};
use mercury_plan::AttnMask;
use rand::{Rng, SeedableRng};

/// Whether piece `p` makes key `c` visible to row `r` (block indices), as cuDNN computes the
/// entry: inside its rectangle, and under its top-left causal mask for a causal piece.
fn covers(p: &Piece, r: usize, c: usize) -> bool {
    let inside = (p.row..p.row + p.rows).contains(&r) && (p.key..p.key + p.keys).contains(&c);
    inside && (!p.causal || c - p.key <= r - p.row)
}

/// Checks that `ps` tile exactly the visible pairs of the block, pair by pair against
/// `mercury_plan::mask`, with no row in two pieces and each causal piece square.
fn check_tiling(
    m: &MaskCx,
    ps: &[Piece],
    (q0, sq, k0, sk): (usize, usize, usize, usize),
    ctx: &str,
) {
    let mut owner = vec![usize::MAX; sq];
    for (i, p) in ps.iter().enumerate() {
        assert!(
            p.rows > 0 && p.keys > 0 && p.row + p.rows <= sq && p.key + p.keys <= sk,
            "{ctx}: {p:?}"
        );
        if p.causal {
            assert_eq!(p.rows, p.keys, "{ctx}: causal piece {p:?} is not square");
        }
        for (r, o) in owner.iter_mut().enumerate().skip(p.row).take(p.rows) {
            assert_eq!(*o, usize::MAX, "{ctx}: row {r} in two pieces");
            *o = i;
        }
    }
    for r in 0..sq {
        for c in 0..sk {
            let want = m.visible(q0 + r, k0 + c);
            let got = owner[r] != usize::MAX && covers(&ps[owner[r]], r, c);
            assert_eq!(got, want, "{ctx}: row {r} key {c}");
        }
    }
}

/// Random documents (1-token ones, one longer than a shard, hundreds), random masks without
/// windows (causal or not, cross-attention boundaries, lower_right) and random blocks: the
/// pieces tile exactly the pairs the mask allows.
#[test]
fn pieces_tile_exactly_the_visible_pairs() {
    let seed: u64 = rand::random();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for case in 0..300 {
        let n = rng.gen_range(1..600);
        let docs = match rng.gen_range(0..4) {
            0 => rng.gen_range(1..4),
            1 => rng.gen_range(1..=n),
            2 => n,
            _ => n.min(rng.gen_range(100..400)),
        };
        let bq = random_docs(&mut rng, n, docs);
        let bk = if rng.gen_bool(0.3) {
            random_docs(&mut rng, n, docs)
        } else {
            bq.clone()
        };
        let all = [bq, bk];
        let mask = AttnMask {
            left: None,
            right: None,
            documents: Some(if rng.gen_bool(0.5) { [0, 0] } else { [0, 1] }),
            lower_right: rng.gen_bool(0.3),
        };
        let causal = rng.gen_bool(0.7);
        let m = MaskCx::new(causal, &mask, &all).unwrap();
        let q0 = rng.gen_range(0..n);
        let sq = rng.gen_range(1..=n - q0);
        let k0 = rng.gen_range(0..n);
        let sk = rng.gen_range(1..=n - k0);
        let ps = pieces(&row_bounds(&m, q0, sq), k0, sk);
        let ctx =
            format!("seed {seed} case {case}: {mask:?} causal {causal} q {q0}+{sq} k {k0}+{sk}");
        check_tiling(&m, &ps, (q0, sq, k0, sk), &ctx);
    }
}

/// Under causal self-attention documents every block of the ring and zigzag schedules has its
/// key range equal to its query range (each document piece causal from its first row) or
/// entirely before it (each piece full): one piece per document meeting the block, of that
/// shape. Shards of random sizes (a document longer than a shard among them).
#[test]
fn ring_blocks_are_one_piece_per_document() {
    let seed: u64 = rand::random();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for case in 0..200 {
        let ranks = rng.gen_range(1..9);
        let shard = rng.gen_range(1..80);
        let n = ranks * shard;
        let docs = match rng.gen_range(0..3) {
            0 => rng.gen_range(1..4),
            1 => rng.gen_range(1..=n),
            _ => n,
        };
        let b = random_docs(&mut rng, n, docs);
        let all = [b.clone()];
        let mask = AttnMask {
            documents: Some([0, 0]),
            ..AttnMask::default()
        };
        let m = MaskCx::new(true, &mask, &all).unwrap();
        for i in 0..ranks {
            for j in 0..=i {
                let (q0, k0) = (i * shard, j * shard);
                let ps = pieces(&row_bounds(&m, q0, shard), k0, shard);
                let ctx = format!("seed {seed} case {case}: shard {shard} block ({i}, {j}) {b:?}");
                check_tiling(&m, &ps, (q0, shard, k0, shard), &ctx);
                let meeting = (0..b.len())
                    .filter(|&d| {
                        let r = b.range(d);
                        let q = r.start.max(q0)..r.end.min(q0 + shard);
                        let k = r.start.max(k0)..r.end.min(k0 + shard);
                        !q.is_empty() && !k.is_empty() && k.start < q.end
                    })
                    .count();
                assert_eq!(ps.len(), meeting, "{ctx}: {ps:?}");
                for p in &ps {
                    if i == j {
                        assert_eq!(p.key, p.row, "{ctx}: {p:?}");
                        assert!(p.causal || p.rows == 1, "{ctx}: {p:?}");
                    } else {
                        assert!(!p.causal, "{ctx}: {p:?}");
                    }
                }
            }
        }
    }
}

/// The uploaded arrays: lengths, then each tensor's offsets (elements) for every entry; the
/// unused entries of the bucket have length 0 and repeat the last offset.
#[test]
fn sets_lay_out_lengths_and_offsets() {
    let l = block(1000, 300, 900, 400);
    let ps = [
        Piece {
            row: 0,
            rows: 100,
            key: 0,
            keys: 100,
            causal: true,
        },
        Piece {
            row: 100,
            rows: 50,
            key: 100,
            keys: 200,
            causal: false,
        },
        Piece {
            row: 150,
            rows: 150,
            key: 150,
            keys: 150,
            causal: true,
        },
    ];
    let sets = ragged_sets(&l, &ps).unwrap();
    assert_eq!(sets.len(), 2);
    let (full, causal) = (&sets[0], &sets[1]);
    assert!(!full.key.causal && causal.key.causal);
    assert_eq!((full.key.entries, causal.key.entries), (1, 2));
    assert_eq!((causal.key.max_sq, causal.key.max_sk), (256, 256));
    assert_eq!((full.key.max_sq, full.key.max_sk), (64, 256));
    let e = 2;
    let h = &causal.host;
    assert_eq!(h.len(), RaggedSet::len(e));
    assert_eq!(&h[..4], &[100, 150, 100, 150]);
    let off = |t: usize| &h[2 * e + t * (e + 1)..2 * e + (t + 1) * (e + 1)];
    // Q: rows 0 and 150 of a dense [1, 1, 300, 128] block; O likewise in the scratch.
    assert_eq!(off(0), &[0, 150 * 128, 150 * 128]);
    assert_eq!(off(1), &[0, 150 * 128, 150 * 128]);
    assert_eq!(off(3), &[0, 150 * 128, 150 * 128]);
    assert_eq!(off(4), &[0, 150, 150]);
    let (sq_ptr, skv_ptr, offs) = causal.arrays(4096);
    assert_eq!((sq_ptr, skv_ptr), (4096, 4096 + 8));
    assert_eq!(offs[0], 4096 + 16);
    assert_eq!(offs[4], 4096 + 16 + 4 * 3 * 4);
    // Every piece of a 1-entry bucket of 1, and the rest padded with zero lengths.
    let one = ragged_sets(&l, &ps[..1]).unwrap();
    assert_eq!(one[0].key.entries, 1);
    let three = [
        ps[0],
        ps[2],
        Piece {
            row: 290,
            rows: 1,
            key: 290,
            keys: 1,
            causal: true,
        },
    ];
    let s = ragged_sets(&l, &three).unwrap();
    assert_eq!(s[0].key.entries, 4);
    assert_eq!(&s[0].host[..8], &[100, 150, 1, 0, 100, 150, 1, 0]);
    let _ = Boundaries::whole(1);
    // Memory cuDNN would address past INT32 elements from a bound pointer: refused.
    let mut big = block(0, 300, 0, 300);
    big.dims.hq = 4;
    big.q.sh = 1 << 30;
    let e = ragged_sets(&big, &ps).unwrap_err();
    assert!(e.contains("q extent"), "{e}");
}

#[test]
fn small_pieces_stay_on_the_nvrtc_kernel() {
    let one = |row| Piece {
        row,
        rows: 1,
        key: row,
        keys: 1,
        causal: false,
    };
    assert!(!worth_it(&[]));
    assert!(!worth_it(&(0..64).map(one).collect::<Vec<_>>()));
    assert!(worth_it(&[
        Piece {
            row: 0,
            rows: 64,
            key: 0,
            keys: 64,
            causal: true
        },
        one(64)
    ]));
}
