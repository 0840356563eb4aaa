//! cuDNN's variable-sequence ("ragged", THD) attention forward: many independent sequences of
//! different lengths in one call, each a batch entry of cuDNN's `[b, h, s, d]` tensors.
//!
//! Each entry `e` has its own query and key lengths (INT32 `[b, 1, 1, 1]` tensors, the
//! matmuls' M / N / K overrides and the padding mask) and its own start in every tensor: an
//! INT32 `[b + 1, 1, 1, 1]` ragged offset per tensor (elements from the bound pointer to the
//! entry's first element; the head and row strides of the key apply within the entry). The
//! plan bakes in the number of entries and the longest lengths (`max_sq`, `max_sk`): a call
//! with fewer entries or shorter ones gives the extra entries length 0 (callers round both up
//! to buckets so that few plans serve every batch).
//!
//! The graph is the composite one ([`super::graph`], Route B) with the padding mask cudnn-frontend
//! builds for `set_padding_mask(true)` (`attn_score_modifiers.h`, `padding_mask`: row and
//! column GEN_INDEX, `row < seq_q` and `col < seq_kv`, LOGICAL_AND, BINARY_SELECT with -inf),
//! then optionally the top-left causal compare of each entry (`row >= col`), then the
//! softmax with Stats: cudnn-frontend's `CompositeSDPANode` for a ragged Q / K / V / O / Stats
//! (`scaled_dot_product_flash_attention.h`; its bmm1 overrides M and N, its bmm2 M and K).

use super::graph::{dense, uid, Builder, DataType, GraphDesc, IoType, OpDesc, PwMode};

/// Unique ids of the variable-sequence tensors (beyond [`uid`]'s).
pub mod ragged_uid {
    /// INT32 `[b, 1, 1, 1]`: each entry's query rows.
    pub const SEQ_Q: i64 = 20;
    /// INT32 `[b, 1, 1, 1]`: each entry's keys.
    pub const SEQ_KV: i64 = 21;
    /// INT32 `[b + 1, 1, 1, 1]` ragged offsets (elements) of Q, K, V, O and Stats.
    pub const Q_OFF: i64 = 22;
    pub const K_OFF: i64 = 23;
    pub const V_OFF: i64 = 24;
    pub const O_OFF: i64 = 25;
    pub const STATS_OFF: i64 = 26;
}

/// Everything a ragged plan depends on. Strides are `[head, row]` in elements (the innermost
/// is 1); each entry's start comes from its ragged offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RaggedKey {
    pub io: IoType,
    /// Batch entries the plan is built for.
    pub entries: i64,
    pub hq: i64,
    pub hk: i64,
    /// Longest query and key runs of an entry.
    pub max_sq: i64,
    pub max_sk: i64,
    pub dqk: i64,
    pub dv: i64,
    pub q: [i64; 2],
    pub k: [i64; 2],
    pub v: [i64; 2],
    pub o: [i64; 2],
    /// Stats head stride (its row stride is 1).
    pub stats_h: i64,
    /// Each entry's query `i` sees its keys `j <= i` (top-left); otherwise all of them.
    pub causal: bool,
    /// Stats addressed through a ragged offset (else a padded `[b, hq, max_sq]` layout).
    pub stats_ragged: bool,
}

impl std::fmt::Display for RaggedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ragged {} entries {} hq{} hk{} max_sq{} max_sk{} d_qk{} d_v{} q{:?} k{:?} o{:?}{}{}",
            self.io.name(),
            self.entries,
            self.hq,
            self.hk,
            self.max_sq,
            self.max_sk,
            self.dqk,
            self.dv,
            self.q,
            self.k,
            self.o,
            if self.causal { " causal" } else { "" },
            if self.stats_ragged {
                ""
            } else {
                " stats=padded"
            }
        )
    }
}

impl RaggedKey {
    /// Checks the sizes and strides the fused kernels need (as [`super::SdpaKey::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        super::graph::validate_sizes([
            self.entries,
            self.hq,
            self.hk,
            self.max_sq,
            self.max_sk,
            self.dqk,
            self.dv,
        ])?;
        for (n, s) in [("q", self.q), ("k", self.k), ("v", self.v), ("o", self.o)] {
            if s.iter().any(|x| *x <= 0 || x % 8 != 0) {
                return Err(format!(
                    "{n} strides {s:?} are not positive multiples of 8 elements (16 bytes)"
                ));
            }
        }
        if self.stats_h <= 0 {
            return Err(format!(
                "stats head stride {} is not positive",
                self.stats_h
            ));
        }
        Ok(())
    }
}

/// The variable-sequence graph of `key` (see the module docs).
pub fn ragged_graph(key: &RaggedKey) -> GraphDesc {
    use ragged_uid as r;
    let io = DataType::from(key.io);
    let mut g = Builder::new();
    let (b, hq, hk, sq, sk, dqk, dv) = (
        key.entries,
        key.hq,
        key.hk,
        key.max_sq,
        key.max_sk,
        key.dqk,
        key.dv,
    );
    let per_entry =
        |g: &mut Builder, u: i64| g.bound(u, DataType::I32, vec![b, 1, 1, 1], vec![1; 4]);
    let seq_q = per_entry(&mut g, r::SEQ_Q);
    let seq_kv = per_entry(&mut g, r::SEQ_KV);
    let mut offsets = vec![r::Q_OFF, r::K_OFF, r::V_OFF, r::O_OFF];
    if key.stats_ragged {
        offsets.push(r::STATS_OFF);
    }
    for u in offsets {
        g.bound(u, DataType::I32, vec![b + 1, 1, 1, 1], vec![1; 4]);
    }
    let ragged = |g: &mut Builder, u: i64, off: i64| {
        if let Some(t) = g.tensors.iter_mut().find(|t| t.uid == u) {
            t.ragged = Some(off);
        }
    };
    let [qh, qr] = key.q;
    let q = g.bound(uid::Q, io, vec![b, hq, sq, dqk], vec![hq * qh, qh, qr, 1]);
    ragged(&mut g, q, r::Q_OFF);
    // K^T is K's memory: dims [b, h_k, d, s_kv], the last two strides swapped.
    let [kh, kr] = key.k;
    let kt = g.bound(uid::K, io, vec![b, hk, dqk, sk], vec![hk * kh, kh, 1, kr]);
    ragged(&mut g, kt, r::K_OFF);
    let [vh, vr] = key.v;
    let v = g.bound(uid::V, io, vec![b, hk, sk, dv], vec![hk * vh, vh, vr, 1]);
    ragged(&mut g, v, r::V_OFF);
    let [oh, or] = key.o;
    let o = g.bound(uid::O, io, vec![b, hq, sq, dv], vec![hq * oh, oh, or, 1]);
    ragged(&mut g, o, r::O_OFF);
    let stats_strides = if key.stats_ragged {
        vec![hq * key.stats_h, key.stats_h, 1, 1]
    } else {
        dense(&[b, hq, sq, 1])
    };
    let stats = g.bound_aligned(
        uid::STATS,
        DataType::F32,
        vec![b, hq, sq, 1],
        stats_strides,
        4,
    );
    if key.stats_ragged {
        ragged(&mut g, stats, r::STATS_OFF);
    }
    let scale = g.scalar(uid::SCALE, DataType::F32);

    let full = [b, hq, sq, sk];
    let s = g.virt(DataType::F32, &full);
    g.ops.push(OpDesc::MatmulVarlen {
        a: q,
        b: kt,
        c: s,
        m: Some(seq_q),
        n: Some(seq_kv),
        k: None,
    });
    let s1 = g.virt(DataType::F32, &full);
    g.pw(PwMode::Mul, DataType::F32, s, Some(scale), s1);
    let padded = padding_mask(&mut g, s1, seq_q, seq_kv, &full);
    let mask = if key.causal {
        super::Mask::Causal
    } else {
        super::Mask::None
    };
    let logits = g.causal_mask(padded, mask, &full);
    g.softmax_pv(logits, (stats, v, o), io, &full, Some((seq_q, seq_kv)));
    g.finish()
}

/// `x` with the logits outside each entry's `seq_q x seq_kv` rectangle set to the fill
/// (cudnn-frontend's `padding_mask`).
fn padding_mask(g: &mut Builder, x: i64, seq_q: i64, seq_kv: i64, full: &[i64]) -> i64 {
    let index = |g: &mut Builder, axis: i64| {
        let y = g.virt(DataType::I32, full);
        g.ops.push(OpDesc::Pointwise {
            mode: PwMode::GenIndex,
            prec: DataType::I32,
            x,
            b: None,
            t: None,
            y,
            axis: Some(axis),
        });
        y
    };
    let r = index(g, 2);
    let c = index(g, 3);
    let r_in = g.virt(DataType::Bool, full);
    g.pw(PwMode::CmpLt, DataType::Bool, r, Some(seq_q), r_in);
    let c_in = g.virt(DataType::Bool, full);
    g.pw(PwMode::CmpLt, DataType::Bool, c, Some(seq_kv), c_in);
    let keep = g.virt(DataType::Bool, full);
    g.pw(PwMode::LogicalAnd, DataType::Bool, r_in, Some(c_in), keep);
    let fill = g.fill();
    let y = g.virt(DataType::F32, full);
    g.ops.push(OpDesc::Pointwise {
        mode: PwMode::BinarySelect,
        prec: DataType::F32,
        x,
        b: Some(fill),
        t: Some(keep),
        y,
        axis: None,
    });
    y
}

/// One variable-sequence forward: device pointers of Q, K, V, O, Stats (each entry's start
/// given by its ragged offsets) and of the per-entry INT32 arrays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RaggedCall {
    pub key: RaggedKey,
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    pub stats: u64,
    pub seq_q: u64,
    pub seq_kv: u64,
    /// Ragged offsets of Q, K, V, O, Stats (`Stats`' unused without `stats_ragged`).
    pub offsets: [u64; 5],
    pub scale: f32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::cudnn::graph::tests::check_topological;

    pub(crate) fn key(causal: bool) -> RaggedKey {
        RaggedKey {
            io: IoType::Bf16,
            entries: 64,
            hq: 32,
            hk: 32,
            max_sq: 8192,
            max_sk: 8192,
            dqk: 128,
            dv: 128,
            q: [32768 * 128, 128],
            k: [32768 * 128, 128],
            v: [32768 * 128, 128],
            o: [32768 * 128, 128],
            stats_h: 32768,
            causal,
            stats_ragged: true,
        }
    }

    #[test]
    fn ragged_graph_is_the_padded_composite() {
        for causal in [false, true] {
            let k = key(causal);
            k.validate().unwrap();
            let g = ragged_graph(&k);
            check_topological(&g);
            // 10 composite ops, 6 of the padding mask, 4 more for causal.
            assert_eq!(g.ops.len(), if causal { 20 } else { 16 });
            for u in [uid::Q, uid::K, uid::V, uid::O, uid::STATS] {
                assert!(g.tensor(u).unwrap().ragged.is_some(), "{u}");
            }
            let varlen = g
                .ops
                .iter()
                .filter(|o| matches!(o, OpDesc::MatmulVarlen { .. }))
                .count();
            assert_eq!(varlen, 2);
            let seq = g.tensor(ragged_uid::SEQ_Q).unwrap();
            assert_eq!(seq.dims, vec![64, 1, 1, 1]);
            assert_eq!(g.tensor(ragged_uid::Q_OFF).unwrap().dims, vec![65, 1, 1, 1]);
            assert_eq!(
                g.tensors.iter().filter(|t| t.uid == uid::FILL).count(),
                1,
                "one fill"
            );
        }
        let mut k = key(true);
        k.stats_ragged = false;
        let g = ragged_graph(&k);
        check_topological(&g);
        assert!(g.tensor(uid::STATS).unwrap().ragged.is_none());
        assert!(g.tensor(ragged_uid::STATS_OFF).is_none());
    }

    #[test]
    fn ragged_keys_are_validated() {
        let mut k = key(false);
        k.q = [100, 128];
        assert!(k.validate().unwrap_err().contains("q strides"));
        let mut k = key(false);
        k.entries = 0;
        assert!(k.validate().is_err());
    }
}
