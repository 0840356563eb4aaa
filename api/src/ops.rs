//! The distributed operators of the Python package, written as CommIR operators for one
//! shape, dtype and world size: the text then compiles like any other operator (its schedule
//! `"auto"` by default), so `mercury.attention` runs the same plans `mercury-run` does.
//!
//! Every operator is global (unsharded) over a one-level mesh of `world` devices, its inputs
//! and outputs placed as the callers hold them: attention's q, k, v and o sharded along the
//! sequence (contiguous, or ring-flash-attn's zigzag: rank r holds chunks r and 2W-1-r of 2W,
//! once or in every round of 2W chunks of a given size),
//! the all-gather GEMM's `x` by rows and `w`, `out` by columns (AsyncTP's
//! `fused_all_gather_matmul`), the GEMM reduce-scatter's `x` by columns, `w` by rows and `out`
//! by rows (`fused_matmul_reduce_scatter`).

use crate::error::Error;
use mercury_plan::DType;
use std::fmt::Write as _;

/// Attention `O = softmax(Q K^T * scale) V` per head, with grouped-query heads (`heads` a
/// multiple of `kv_heads`) and a value head dim of its own (MLA: `v_head_dim != head_dim`).
/// Buffers `Q [batch, heads, seq, head_dim]`, `K [batch, kv_heads, kv_seq, head_dim]`,
/// `V [batch, kv_heads, kv_seq, v_head_dim]`, `O [batch, heads, seq, v_head_dim]`, `seq` and
/// `kv_seq` the global sequence lengths; masked by `causal`, a sliding `window` and packed
/// `documents` (`mercury_plan::mask`, `docs/dialect.md`, "Attention masks").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionSpec {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// Query tokens of the whole sequence (all ranks' shards).
    pub seq: usize,
    /// Key/value tokens of the whole sequence (`seq` for self-attention; another length only
    /// with [`Documents::Split`]).
    pub kv_seq: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    /// Query i sees keys j <= i (positions in the whole sequence).
    pub causal: bool,
    /// The softmax scale (`None`: the patch's default, `1 / sqrt(head_dim)`).
    pub scale: Option<f64>,
    pub dtype: DType,
    /// Devices of the mesh (ranks of the group).
    pub world: usize,
    /// The shards are ring-flash-attn's zigzag layout instead of contiguous blocks.
    pub zigzag: bool,
    /// With `zigzag`: the zigzag repeats over chunks of this many positions (rank r holds
    /// chunks r and 2W-1-r of every round of 2W; CommIR's `zigzag(0, chunk)`). `None`: one
    /// round (chunks of `seq / 2W`).
    pub zigzag_chunk: Option<usize>,
    /// The forward keeps its log-sum-exp in an output `L [batch, heads, seq]` (f32; f64 for
    /// f64 operands): natural log of each row's sum of `exp(scale q.k)` over the keys it sees.
    pub lse: bool,
    /// flash-attn's `window_size = (left, right)`: query `i` sees keys `i - left` to
    /// `i + right` (offsets within its document; `-1`: unbounded on that side). `None` or
    /// `(-1, -1)`: no window.
    pub window: Option<(i64, i64)>,
    /// Packed sequences: run-time document boundaries (flash-attn's `cu_seqlens`).
    pub documents: Documents,
}

/// The document boundaries of an [`AttentionSpec`]: run-time inputs of every run (prefix sums,
/// flash-attn's `cu_seqlens`), bound by name like a buffer, so one compiled plan serves every
/// batch of documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Documents {
    /// No boundaries: the whole sequence of each batch entry is one document.
    #[default]
    None,
    /// One set of boundaries `D` (positions `seq`) for queries and keys: self-attention on
    /// packed documents (`documents = @D`).
    Shared,
    /// Boundaries `Dq` over the query positions (`seq`) and `Dk` over the key positions
    /// (`kv_seq`), the same number of documents, offsets measured from each document's end
    /// (`documents = [@Dq, @Dk], lower_right = true`: flash-attn's alignment when a document
    /// has more keys than queries or fewer).
    Split,
}

impl Documents {
    /// `(name, positions)` of each boundaries input of an operator with these sequence
    /// lengths, in the order the patch names them.
    pub fn inputs(&self, seq: usize, kv_seq: usize) -> Vec<(&'static str, usize)> {
        match self {
            Documents::None => vec![],
            Documents::Shared => vec![("D", seq)],
            Documents::Split => vec![("Dq", seq), ("Dk", kv_seq)],
        }
    }
}

/// The tile type the patches compute in: f64 for f64 operands, f32 otherwise.
fn acc(dtype: DType) -> &'static str {
    if dtype == DType::F64 {
        "f64"
    } else {
        "f32"
    }
}

impl AttentionSpec {
    /// Refuses what the operator cannot describe, naming the value.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Input(m));
        for (what, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("seq", self.seq),
            ("kv_seq", self.kv_seq),
            ("head_dim", self.head_dim),
            ("v_head_dim", self.v_head_dim),
            ("world", self.world),
        ] {
            if v == 0 {
                return bad(format!("attention: {what} is 0"));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "attention: q has {} heads, k and v {}: grouped-query attention needs the query heads to be a multiple of the key/value heads",
                self.heads, self.kv_heads
            ));
        }
        let (blocks, parts) = match (self.zigzag, self.zigzag_chunk) {
            (false, None) => (self.world, "equal shards".to_string()),
            (true, None) => (2 * self.world, "equal zigzag chunks".to_string()),
            (true, Some(c)) if c > 0 => (
                2 * self.world * c,
                format!("rounds of {} zigzag chunks of {c}", 2 * self.world),
            ),
            (true, Some(_)) => return bad("attention: a zigzag chunk of 0 positions".into()),
            (false, Some(_)) => {
                return bad("attention: a zigzag chunk without the zigzag layout".into())
            }
        };
        for (what, n) in [("query", self.seq), ("key/value", self.kv_seq)] {
            if !n.is_multiple_of(blocks) {
                return bad(format!(
                    "attention: the {what} sequence of {n} tokens does not split into {} over {} ranks",
                    if self.zigzag_chunk.is_some() { parts.clone() } else { format!("{blocks} {parts}") },
                    self.world
                ));
            }
        }
        if self.kv_seq != self.seq && self.documents != Documents::Split {
            return bad(format!(
                "attention: {} query tokens and {} key/value tokens: different lengths need per-side document boundaries (Documents::Split: flash-attn's cu_seqlens_q and cu_seqlens_k)",
                self.seq, self.kv_seq
            ));
        }
        if let Some((l, r)) = self.window {
            if l < -1 || r < -1 {
                return bad(format!(
                    "attention: window ({l}, {r}): each side is a number of positions >= 0, or -1 for unbounded"
                ));
            }
        }
        if let Some(s) = self.scale {
            if !(s.is_finite() && s > 0.0) {
                return bad(format!(
                    "attention: softmax_scale {s} must be positive and finite"
                ));
            }
        }
        Ok(())
    }

    /// The header every attention operator shares: the mesh, the kernel line, the axes, and
    /// the sharding of a sequence-sharded buffer of 4 and of 3 dimensions.
    /// Returns `(text, q heads, q indices, kv heads, sharding 4-D, sharding 3-D)`.
    fn header(
        &self,
        kernel: &str,
    ) -> (
        String,
        &'static str,
        &'static str,
        &'static str,
        String,
        String,
    ) {
        let g = self.heads / self.kv_heads;
        let seq_sharding = match (self.zigzag, self.zigzag_chunk) {
            (true, Some(c)) => format!("S(zigzag(0, {c}))"),
            (true, None) => "S(zigzag(0))".to_string(),
            (false, _) => "S(0)".to_string(),
        };
        let sh4 = format!("sharding [R, R, {seq_sharding}, R]");
        let sh3 = format!("sharding [R, R, {seq_sharding}]");
        let mut s = String::new();
        let _ = writeln!(
            s,
            "commir.mesh @mesh shape [{}] names [\"gpu\"]",
            self.world
        );
        let _ = writeln!(s, "commir.kernel @{kernel} on @mesh {{");
        let _ = writeln!(s, "  commir.axis @b = {} spatial", self.batch);
        let (qh, qidx, kh) = if g == 1 {
            let _ = writeln!(s, "  commir.axis @h = {} spatial", self.heads);
            ("@h", "@b, @h, @i", "@h")
        } else {
            let _ = writeln!(s, "  commir.axis @hk = {} spatial", self.kv_heads);
            let _ = writeln!(s, "  commir.axis @g = {g} spatial");
            ("@hk * @g", "@b, @hk, @g, @i", "@hk")
        };
        let _ = writeln!(s, "  commir.axis @i = {} spatial", self.seq);
        let _ = writeln!(s, "  commir.axis @j = {} managed", self.kv_seq);
        (s, qh, qidx, kh, sh4, sh3)
    }

    /// The `commir.documents` declarations of the boundaries inputs (after the buffers).
    fn documents_decls(&self, s: &mut String) {
        for (name, positions) in self.documents.inputs(self.seq, self.kv_seq) {
            let _ = writeln!(s, "  commir.documents @{name} positions {positions}");
        }
    }

    /// The patch attributes: `causal = ...`, the scale when given, and the mask.
    fn attrs(&self) -> String {
        let mut a = format!("causal = {}", self.causal);
        if let Some(x) = self.scale {
            let _ = write!(a, ", scale = {x:?}");
        }
        match self.documents {
            Documents::None => {}
            Documents::Shared => a.push_str(", documents = @D"),
            Documents::Split => a.push_str(", documents = [@Dq, @Dk], lower_right = true"),
        }
        if let Some((l, r)) = self.window.filter(|w| *w != (-1, -1)) {
            let _ = write!(a, ", window = [{l}, {r}]");
        }
        format!("{{{a}}}")
    }

    /// The operator as CommIR text (kernel `@attention`): buffers `Q`, `K`, `V` in, `O` out,
    /// and with [`AttentionSpec::lse`] the log-sum-exp `L` out.
    pub fn commir(&self) -> Result<String, Error> {
        self.validate()?;
        let (dt, acc) = (self.dtype.name(), acc(self.dtype));
        let (mut s, qh, qidx, kh, sh, sh3) = self.header("attention");
        let (d, dv) = (self.head_dim, self.v_head_dim);
        let _ = writeln!(s, "  commir.buffer @Q : [@b, {qh}, @i, {d}] {dt} in {sh}");
        let _ = writeln!(s, "  commir.buffer @K : [@b, {kh}, @j, {d}] {dt} in {sh}");
        let _ = writeln!(s, "  commir.buffer @V : [@b, {kh}, @j, {dv}] {dt} in {sh}");
        let _ = writeln!(s, "  commir.buffer @O : [@b, {qh}, @i, {dv}] {dt} out {sh}");
        if self.lse {
            let _ = writeln!(s, "  commir.buffer @L : [@b, {qh}, @i] {acc} out {sh3}");
        }
        self.documents_decls(&mut s);
        let t = format!("!commir.tile<{dt}>");
        let a = format!("!commir.tile<{acc}>");
        let _ = writeln!(s, "  %q = commir.load @Q[{qidx}] : {t}");
        let _ = writeln!(s, "  %k = commir.load @K[@b, {kh}, @j] : {t}");
        let _ = writeln!(s, "  %v = commir.load @V[@b, {kh}, @j] : {t}");
        let _ = writeln!(
            s,
            "  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {} : ({t}, {t}, {t}) -> ({a}, {a})",
            self.attrs()
        );
        let keep = if self.lse { " lse @L" } else { "" };
        let _ = writeln!(
            s,
            "  commir.reduce lse_merge %o, %lse into @O[{qidx}]{keep} : {a}, {a}"
        );
        let _ = writeln!(s, "}}");
        Ok(s)
    }

    /// The backward of [`AttentionSpec::commir`] as CommIR text (kernel `@attention_bwd`,
    /// `docs/dialect.md`, "Attention backward"): buffers `Q`, `K`, `V`, `O`, `dO` (the loss's
    /// gradient with respect to `O`, O's dtype) and `L` (the forward's log-sum-exp) in, `dQ`,
    /// `dK`, `dV` out in the operands' dtype, every one sequence-sharded as the forward's.
    pub fn backward_commir(&self) -> Result<String, Error> {
        self.validate()?;
        let (dt, acc) = (self.dtype.name(), acc(self.dtype));
        let (mut s, qh, qidx, kh, sh, sh3) = self.header("attention_bwd");
        let (d, dv) = (self.head_dim, self.v_head_dim);
        for (name, heads, seq, dim, role) in [
            ("Q", qh, "@i", d, "in"),
            ("K", kh, "@j", d, "in"),
            ("V", kh, "@j", dv, "in"),
            ("O", qh, "@i", dv, "in"),
            ("dO", qh, "@i", dv, "in"),
        ] {
            let _ = writeln!(
                s,
                "  commir.buffer @{name} : [@b, {heads}, {seq}, {dim}] {dt} {role} {sh}"
            );
        }
        let _ = writeln!(s, "  commir.buffer @L : [@b, {qh}, @i] {acc} in {sh3}");
        for (name, heads, seq, dim) in [
            ("dQ", qh, "@i", d),
            ("dK", kh, "@j", d),
            ("dV", kh, "@j", dv),
        ] {
            let _ = writeln!(
                s,
                "  commir.buffer @{name} : [@b, {heads}, {seq}, {dim}] {dt} out {sh}"
            );
        }
        self.documents_decls(&mut s);
        let t = format!("!commir.tile<{dt}>");
        let a = format!("!commir.tile<{acc}>");
        let kidx = format!("@b, {kh}, @j");
        for (v, name, idx, ty) in [
            ("q", "Q", qidx, &t),
            ("k", "K", kidx.as_str(), &t),
            ("v", "V", kidx.as_str(), &t),
            ("o", "O", qidx, &t),
            ("do", "dO", qidx, &t),
            ("lse", "L", qidx, &a),
        ] {
            let _ = writeln!(s, "  %{v} = commir.load @{name}[{idx}] : {ty}");
        }
        let _ = writeln!(
            s,
            "  %dq, %dk, %dv = commir.patch \"attention_bwd\" (%q, %k, %v, %o, %do, %lse) {} : ({t}, {t}, {t}, {t}, {t}, {a}) -> ({a}, {a}, {a})",
            self.attrs()
        );
        let _ = writeln!(s, "  commir.reduce add %dq into @dQ[{qidx}] : {a}");
        let _ = writeln!(s, "  commir.reduce add %dk into @dK[{kidx}] : {a}");
        let _ = writeln!(s, "  commir.reduce add %dv into @dV[{kidx}] : {a}");
        let _ = writeln!(s, "}}");
        Ok(s)
    }

    /// The backward schedule of this attention: none at one rank; else `shift-shard`, the
    /// ring backward (key/value shards travel the ring, their dK/dV partials shift-reduced
    /// home; balanced for causal attention, and on declared zigzag shards nothing is
    /// permuted: `docs/primitives.md`).
    pub fn backward_schedule(&self) -> &'static str {
        if self.world == 1 {
            "none"
        } else {
            "shift-shard"
        }
    }
}

/// Which of AsyncTP's two GEMMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmKind {
    /// `out[:, cols_r] = all_gather(x)[m, k] @ w_r[k, n / W]`: `X` sharded by rows, `W` and
    /// `OUT` by columns.
    AllGather,
    /// `out_r[m / W, n] = rows_r(sum_r x_r[m, k / W] @ w_r[k / W, n])`: `X` sharded by
    /// columns, `W` by rows, `OUT` by rows.
    ReduceScatter,
}

/// `OUT[m, n] = X[m, k] W[k, n]` over `world` devices, placed as `kind` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmSpec {
    pub kind: GemmKind,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub dtype: DType,
    pub world: usize,
}

impl GemmSpec {
    /// The operator as CommIR text (kernel `@all_gather_matmul` or `@matmul_reduce_scatter`).
    pub fn commir(&self) -> Result<String, Error> {
        for (what, v) in [
            ("m", self.m),
            ("k", self.k),
            ("n", self.n),
            ("world", self.world),
        ] {
            if v == 0 {
                return Err(Error::Input(format!("matmul: {what} is 0")));
            }
        }
        let (name, split, xs, ws, os) = match self.kind {
            GemmKind::AllGather => (
                "all_gather_matmul",
                [
                    ("m (the gathered rows)", self.m),
                    ("n (w's columns)", self.n),
                ],
                "[S(0), R]",
                "[R, S(0)]",
                "[R, S(0)]",
            ),
            GemmKind::ReduceScatter => (
                "matmul_reduce_scatter",
                [
                    ("k (the reduced dimension)", self.k),
                    ("m (the scattered rows)", self.m),
                ],
                "[R, S(0)]",
                "[S(0), R]",
                "[S(0), R]",
            ),
        };
        for (what, v) in split {
            if !v.is_multiple_of(self.world) {
                return Err(Error::Input(format!(
                    "{name}: {what} = {v} does not split into {} equal shards",
                    self.world
                )));
            }
        }
        let (dt, acc) = (self.dtype.name(), acc(self.dtype));
        let t = format!("!commir.tile<{dt}>");
        let a = format!("!commir.tile<{acc}>");
        let mut s = String::new();
        let _ = writeln!(
            s,
            "commir.mesh @mesh shape [{}] names [\"gpu\"]",
            self.world
        );
        let _ = writeln!(s, "commir.kernel @{name} on @mesh {{");
        let _ = writeln!(s, "  commir.axis @m = {} spatial", self.m);
        let _ = writeln!(s, "  commir.axis @k = {} managed", self.k);
        let _ = writeln!(s, "  commir.axis @n = {} spatial", self.n);
        let _ = writeln!(s, "  commir.buffer @X : [@m, @k] {dt} in sharding {xs}");
        let _ = writeln!(s, "  commir.buffer @W : [@k, @n] {dt} in sharding {ws}");
        let _ = writeln!(s, "  commir.buffer @OUT : [@m, @n] {dt} out sharding {os}");
        let _ = writeln!(s, "  %x = commir.load @X[@m, @k] : {t}");
        let _ = writeln!(s, "  %w = commir.load @W[@k, @n] : {t}");
        let _ = writeln!(
            s,
            "  %c = commir.patch \"gemm\" (%x, %w) : ({t}, {t}) -> {a}"
        );
        let _ = writeln!(s, "  commir.reduce add %c into @OUT[@m, @n] : {a}");
        let _ = writeln!(s, "}}");
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> AttentionSpec {
        AttentionSpec {
            batch: 1,
            heads: 4,
            kv_heads: 2,
            seq: 12,
            kv_seq: 16,
            head_dim: 4,
            v_head_dim: 6,
            causal: true,
            scale: None,
            dtype: DType::F64,
            world: 2,
            zigzag: false,
            zigzag_chunk: None,
            lse: true,
            window: Some((3, -1)),
            documents: Documents::Split,
        }
    }

    #[test]
    fn masks_become_the_patch_attributes_and_documents_inputs() {
        let s = spec();
        for text in [s.commir().unwrap(), s.backward_commir().unwrap()] {
            assert!(text.contains("commir.axis @j = 16 managed"), "{text}");
            assert!(text.contains("commir.documents @Dq positions 12"), "{text}");
            assert!(text.contains("commir.documents @Dk positions 16"), "{text}");
            assert!(
                text.contains(
                    "{causal = true, documents = [@Dq, @Dk], lower_right = true, window = [3, -1]}"
                ),
                "{text}"
            );
        }
        let shared = AttentionSpec {
            kv_seq: 12,
            documents: Documents::Shared,
            window: Some((-1, -1)),
            ..s
        };
        let text = shared.commir().unwrap();
        assert!(text.contains("{causal = true, documents = @D}"), "{text}");
        assert!(text.contains("commir.documents @D positions 12"), "{text}");
    }

    #[test]
    fn what_the_mask_cannot_describe_is_refused() {
        let cross = AttentionSpec {
            documents: Documents::None,
            ..spec()
        };
        let e = cross.commir().unwrap_err().message().to_string();
        assert!(e.contains("per-side document boundaries"), "{e}");
        let bad = AttentionSpec {
            window: Some((2, -3)),
            ..spec()
        };
        let e = bad.commir().unwrap_err().message().to_string();
        assert!(e.contains("window (2, -3)"), "{e}");
        let uneven = AttentionSpec {
            kv_seq: 15,
            ..spec()
        };
        let e = uneven.commir().unwrap_err().message().to_string();
        assert!(e.contains("key/value sequence of 15 tokens"), "{e}");
    }

    /// Zigzag over chunks declares `S(zigzag(0, C))`; chunks that do not make whole rounds, a
    /// chunk of 0 and a chunk without the zigzag layout are refused.
    #[test]
    fn zigzag_chunks_are_declared_and_checked() {
        let s = AttentionSpec {
            seq: 16,
            kv_seq: 16,
            zigzag: true,
            zigzag_chunk: Some(2),
            ..spec()
        };
        let text = s.commir().unwrap();
        assert!(
            text.contains("sharding [R, R, S(zigzag(0, 2)), R]"),
            "{text}"
        );
        for (chunk, zigzag, says) in [
            (
                3,
                true,
                "does not split into rounds of 4 zigzag chunks of 3 over 2 ranks",
            ),
            (0, true, "a zigzag chunk of 0 positions"),
            (2, false, "a zigzag chunk without the zigzag layout"),
        ] {
            let bad = AttentionSpec {
                zigzag,
                zigzag_chunk: Some(chunk),
                ..s
            };
            let e = bad.commir().unwrap_err().message().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
