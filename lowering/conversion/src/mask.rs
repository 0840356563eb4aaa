//! The causal mask of an unpatched body (`commir.mask causal`) on one tile of the lowering.
//!
//! When the key axis is split, a block of a tile can leave query rows without a visible key:
//! every key of the block when it lies wholly above the diagonal, some rows when it straddles
//! it. The unsplit kernel never has such rows (every query sees at least its own position), so
//! the lowering must decide what the block contributes for them, and it may do one of two
//! things only where that gives the unsplit kernel's result:
//!
//! - **skip** the rows (for a block wholly above the diagonal: the block and everything
//!   computed from its masked values are left out). Right where a masked key contributes
//!   nothing in the unsplit kernel: the softmax pattern, whose `exp(-inf) = 0` weights are
//!   the identity of their sums and whose log-sum-exp merge gives an `lse = -inf` part no
//!   weight.
//! - **compute** them as written (the mask hides every key of those rows). Right wherever
//!   that value is a number: e.g. `max(mask(s), s)`, which keeps the unmasked scores, or
//!   `exp(mask(s))` stored into an output (zeros). A naive softmax of such a row is NaN
//!   (`-inf - -inf`), which is why it cannot simply be computed.
//!
//! [`mask_rows`] follows the mask's value through the body with what a row whose every key
//! is masked holds ([`Held`]) and classifies every sink it reaches (a reduction, a store, a
//! patch). Where neither way is right the lowering refuses, located at the sink.

use crate::context::err;
use mercury_commir::{Compute, Kernel, ReduceKind, Stmt};
use mercury_ir::{Diagnostic, Location, ValueId};
use mercury_plan::tile::{BinaryFn, Instr, UnaryFn};
use std::collections::HashMap;

/// The causal mask `mask` of kernel `k` on a `[.., query, key]` tile whose first position is
/// `p` and shape `s`: `None` when every key of the block lies after every query and the body
/// leaves such rows out ([`MaskRows::Skip`]: the block is skipped), else the mask instruction
/// (which hides every key of a row that has none visible). Refused with a located error:
/// sequence positions that are not one run (`scattered`: a zigzag or striped placement),
/// tiles of rank < 2, and rows without a visible key that can be neither skipped nor computed
/// ([`mask_rows`]; rows inside a block with visible keys cannot be skipped alone: found by
/// mercury-fuzz, regression tools/mercury-fuzz/corpus/schedules/naive-causal-tiled-keys.mlir).
pub(crate) fn causal_mask(
    k: &Kernel,
    mask: ValueId,
    p: &[Option<usize>],
    s: &[usize],
    scattered: bool,
    loc: &Location,
) -> Result<Option<Instr>, Diagnostic> {
    let n = p.len();
    let last_two = match p {
        [.., Some(q), Some(k)] if !scattered => Some((*q, *k)),
        [.., _, _] => None,
        _ if scattered => None,
        _ => return Err(err(loc, "a causal mask needs [.., query, key] tiles")),
    };
    let Some((row_offset, col_offset)) = last_two else {
        return Err(err(
            loc,
            "a causal mask on a tile whose sequence positions are not one run \
             (a zigzag or striped placement) is not supported; patch the body \
             into attention (--patch) or keep a block placement",
        ));
    };
    let instr = Instr::CausalMask {
        x: 0,
        row_offset,
        col_offset,
    };
    if col_offset <= row_offset {
        // Every row sees its first key.
        return Ok(Some(instr));
    }
    let (rows, keys) = (row_offset + s[n - 2], col_offset + s[n - 1]);
    let whole = col_offset >= rows;
    let what = if whole {
        format!(
            "over query positions {row_offset}..{rows} and key positions {col_offset}..{keys} \
             masks every key of the block"
        )
    } else {
        format!(
            "over query positions {row_offset}..{rows} and key positions {col_offset}..{keys} \
             leaves rows {row_offset}..{col_offset} without a visible key"
        )
    };
    let advice = "split the query axis like the key axis, keep the key axis whole, or patch \
                  the body into attention (--patch)";
    // Located at the mask, the note at the sink that decides.
    let refuse = |at: Location, why: String, how: &str| {
        err(loc, format!("a causal mask {what}; {how}; {advice}"))
            .with_note(at, format!("here {why}"))
    };
    match mask_rows(k, mask) {
        MaskRows::Skip { .. } | MaskRows::Either if whole => Ok(None),
        MaskRows::Compute | MaskRows::Either => Ok(Some(instr)),
        MaskRows::Skip {
            why_not_computed: (at, why),
        } => Err(refuse(
            at,
            why,
            "this body needs such rows left out, which a block with visible keys cannot do",
        )),
        MaskRows::Refuse(at, why) => Err(refuse(
            at,
            why,
            "this body can neither leave such rows out nor compute them",
        )),
    }
}

/// What a value holds in a row whose every key the mask hides (the mask's `-inf`s carried
/// forward). Values the mask does not reach are not tracked; in the rules they count as
/// [`Held::Number`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// `-inf` everywhere in the row.
    NegInf,
    /// `+inf` everywhere in the row (`x - (-inf)`; `exp` of it).
    PosInf,
    /// `0` everywhere in the row.
    Zero,
    /// Finite numbers the rules cannot name.
    Number,
    /// NaN, or nothing the rules can vouch for (a patch's result).
    NaN,
}

use Held::{NaN, NegInf, Number, PosInf, Zero};

/// What the lowering may do with the rows of a tile that a causal mask leaves without a
/// visible key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MaskRows {
    /// Leave them out: a block wholly above the diagonal is skipped. Rows inside a block that
    /// has visible keys too cannot be left out alone, so such a block is refused, with
    /// [`MaskRows::Skip::why_not_computed`] (the sink where computing them gives NaN).
    Skip {
        why_not_computed: (Location, String),
    },
    /// Compute them as written: the mask hides every key, and the body's values for them are
    /// numbers that the unsplit kernel also computes.
    Compute,
    /// Either: leaving them out and computing them give the same result (the mask reaches no
    /// sink, or only sums of zeros). A block wholly above the diagonal is skipped, the rows of
    /// one that straddles it computed.
    Either,
    /// Neither: refuse, at the sink, with the reason.
    Refuse(Location, String),
}

/// What `mask` (the result of a `commir.mask causal` of kernel `k`) allows for rows without a
/// visible key; see the module docs. Every sink its value reaches decides:
///
/// | sink | the value there | skip | compute |
/// |---|---|---|---|
/// | `commir.reduce add` | `0` | yes | yes |
/// | `commir.reduce add` | `-inf` or a number | no | yes |
/// | `commir.reduce lse_merge (o, lse)` | scores `t` of the pair `-inf` | yes | if `o`, `lse` are not NaN |
/// | `commir.reduce lse_merge (o, lse)` | other scores | no | if `o`, `lse` are not NaN |
/// | `commir.store` into a temp | | (followed to the loads of the same tile) | |
/// | `commir.load` of a temp: another tile, or before the store | | no | no |
/// | `commir.store` | not NaN | no | yes |
/// | anything | NaN | no | no |
/// | `commir.patch "gemm"` | the masked rows as its A, `0` or numbers | no | yes (followed as a matmul) |
/// | other patches | | no | no |
///
/// Skipping needs every sink to allow it, and so does computing; where both are right (a mask
/// whose value reaches no sink, or only sums of zeros) either is taken.
pub(crate) fn mask_rows(k: &Kernel, mask: ValueId) -> MaskRows {
    let mut held: HashMap<ValueId, Held> = HashMap::new();
    held.insert(mask, NegInf);
    // Every compute op's definition, for finding a softmax pair's scores.
    let mut defs: HashMap<ValueId, (&Compute, &[ValueId])> = HashMap::new();
    // Per sink: whether it allows skipping and computing, where it is, and what it gets.
    let mut sinks: Vec<(bool, bool, Location, String)> = Vec::new();
    // A temp carries what was stored into it to its loads of the same tile (indices written
    // alike); a load of it at other indices, or before the store, is refused (2026-12-03:
    // scores stored into a temp and loaded back escaped the rules, NaN with exit 0).
    let mut temps: HashMap<String, (Vec<mercury_commir::IndexExpr>, Held, Location)> =
        HashMap::new();
    let mut temp_loads: Vec<(String, Location)> = Vec::new();
    let is_temp = |b: &str| k.buffer(b).map(|b| b.role) == Some(mercury_commir::Role::Temp);
    k.walk(&mut |s, _| match s {
        Stmt::Load { result, access } if is_temp(&access.buffer) => {
            match temps.get(&access.buffer) {
                Some((ix, h, _)) if *ix == access.indices => {
                    held.insert(*result, *h);
                }
                Some((_, h, at)) => sinks.push((
                    false,
                    false,
                    access.loc.clone(),
                    format!(
                        "this load of '@{}' reads a tile other than the one stored at {} with {} in the masked rows, which the rules do not follow",
                        access.buffer,
                        at,
                        name(*h)
                    ),
                )),
                None => temp_loads.push((access.buffer.clone(), access.loc.clone())),
            }
        }
        Stmt::Compute {
            op, inputs, output, ..
        } => {
            defs.insert(*output, (op, inputs.as_slice()));
            if *output == mask {
                return;
            }
            let ins: Vec<Option<Held>> = inputs.iter().map(|v| held.get(v).copied()).collect();
            if ins.iter().all(Option::is_none) {
                return;
            }
            let at = |i: usize| ins.get(i).copied().flatten().unwrap_or(Number);
            let out = match op {
                Compute::Mask(_) => NegInf,
                Compute::Cast => at(0),
                Compute::Scale(f) => scale(at(0), *f),
                Compute::Unary(f) => unary(*f, at(0)),
                Compute::Binary(f) => binary(*f, at(0), at(1)),
                // Over the key axis: every element of the row holds the same.
                Compute::RowReduce(_) => at(0),
                Compute::Matmul { transpose_a, .. } => {
                    match (ins[0], ins.get(1).copied().flatten()) {
                        // The masked operand's rows times another operand, contracted over the
                        // keys: a row of zeros gives zeros, anything else is not followed.
                        (Some(Zero), None) if !transpose_a => Zero,
                        (Some(Number), None) if !transpose_a => Number,
                        // Transposed, contracted over the masked rows themselves (the
                        // backward's P^T dO, dS^T Q): a row of zeros adds nothing to the
                        // product, which is zero when every row of the block is masked.
                        (Some(Zero), None) => Zero,
                        _ => NaN,
                    }
                }
            };
            held.insert(*output, out);
        }
        Stmt::Reduce {
            kind,
            values,
            access,
            ..
        } => {
            let got: Vec<Option<Held>> = values.iter().map(|v| held.get(v).copied()).collect();
            if got.iter().all(Option::is_none) {
                return;
            }
            let h = |i: usize| got.get(i).copied().flatten().unwrap_or(Number);
            let (skip, compute, what) = match kind {
                ReduceKind::Add => {
                    let v = h(0);
                    (
                        v == Zero,
                        v != NaN,
                        format!(
                            "'commir.reduce add' into '@{}' gets {}",
                            access.buffer,
                            name(v)
                        ),
                    )
                }
                ReduceKind::LseMerge => {
                    // The block's part is (o, lse) = (softmax(t) v, log sum exp t) over its
                    // keys (the verifier holds the pair to that form): rows whose scores t
                    // are all -inf have lse = -inf, no weight in the merge, whatever the
                    // body's shift m makes of o. Computed as written they are the values
                    // the walk followed.
                    let t = values.first().and_then(|o| softmax_scores(&defs, *o));
                    let (o, lse) = (h(0), h(1));
                    (
                        t.and_then(|t| held.get(&t)) == Some(&NegInf),
                        o != NaN && lse != NaN,
                        format!(
                            "'commir.reduce lse_merge' into '@{}' gets o = {} and lse = {}{}",
                            access.buffer,
                            name(o),
                            name(lse),
                            if o == NaN || lse == NaN {
                                " (their naive softmax is NaN)"
                            } else {
                                ""
                            }
                        ),
                    )
                }
            };
            sinks.push((skip, compute, access.loc.clone(), what));
        }
        Stmt::Store { value, access } if is_temp(&access.buffer) => {
            match held.get(value).copied() {
                // Followed to its loads.
                Some(v) => {
                    if let Some((b, at)) = temp_loads.iter().find(|(b, _)| *b == access.buffer) {
                        sinks.push((
                            false,
                            false,
                            at.clone(),
                            format!(
                                "this load of '@{b}' comes before the store of the masked values into it, which the rules do not follow"
                            ),
                        ));
                    }
                    temps.insert(
                        access.buffer.clone(),
                        (access.indices.clone(), v, access.loc.clone()),
                    );
                }
                None => {
                    if temps
                        .get(&access.buffer)
                        .is_some_and(|(ix, _, _)| *ix == access.indices)
                    {
                        temps.remove(&access.buffer);
                    }
                }
            }
        }
        Stmt::Store { value, access } => {
            if let Some(v) = held.get(value).copied() {
                sinks.push((
                    false,
                    v != NaN,
                    access.loc.clone(),
                    format!(
                        "'commir.store' into '@{}' writes {}",
                        access.buffer,
                        name(v)
                    ),
                ));
            }
        }
        Stmt::Patch {
            kernel,
            inputs,
            outputs,
            loc,
            ..
        } => {
            let ins: Vec<Option<Held>> = inputs.iter().map(|v| held.get(v).copied()).collect();
            if ins.iter().all(Option::is_none) {
                return;
            }
            // A gemm of the masked rows (its A operand, contracted over the keys) by another
            // operand is followed like a matmul; the lowering computes it as written (a
            // skipped operand has no patch to skip with it).
            let gemm = match (kernel.as_str(), ins.as_slice()) {
                ("gemm", [Some(h @ (Zero | Number)), None]) => Some(*h),
                _ => None,
            };
            match (gemm, outputs.first()) {
                (Some(h), Some(out)) => {
                    held.insert(*out, h);
                    sinks.push((
                        false,
                        true,
                        loc.clone(),
                        "patch \"gemm\" takes the masked values".into(),
                    ));
                }
                _ => sinks.push((
                    false,
                    false,
                    loc.clone(),
                    format!("patch \"{kernel}\" takes the masked values, which it cannot be shown to handle"),
                )),
            }
        }
        _ => {}
    });
    if let Some((_, _, loc, what)) = sinks.iter().find(|s| !s.0 && !s.1) {
        return MaskRows::Refuse(loc.clone(), what.clone());
    }
    if sinks.iter().all(|s| s.0) {
        return match sinks.iter().find(|s| !s.1) {
            Some((_, _, loc, what)) => MaskRows::Skip {
                why_not_computed: (loc.clone(), what.clone()),
            },
            // Both are right (a mask that reaches nothing, or only sums of zeros).
            None => MaskRows::Either,
        };
    }
    match sinks.iter().find(|s| !s.1) {
        Some((_, _, loc, what)) => MaskRows::Refuse(loc.clone(), what.clone()),
        None => MaskRows::Compute,
    }
}

/// The scores `t` of the blockwise softmax pair whose `o` is `o` (`o = u / l`, optionally
/// cast; `l = row_reduce sum p`; `p = exp(t - m)` or `p = exp(t)`), `None` where `o` is not
/// defined so (a patch's output).
fn softmax_scores(defs: &HashMap<ValueId, (&Compute, &[ValueId])>, o: ValueId) -> Option<ValueId> {
    let def = |v: ValueId| defs.get(&v).copied();
    let o = match def(o) {
        Some((Compute::Cast, a)) => a[0],
        _ => o,
    };
    let (Compute::Binary(BinaryFn::Div), ul) = def(o)? else {
        return None;
    };
    let (Compute::RowReduce(_), p) = def(*ul.get(1)?)? else {
        return None;
    };
    let (Compute::Unary(UnaryFn::Exp), d) = def(p[0])? else {
        return None;
    };
    Some(match def(d[0]) {
        Some((Compute::Binary(BinaryFn::Sub), tm)) => tm[0],
        _ => d[0],
    })
}

fn name(h: Held) -> &'static str {
    match h {
        NegInf => "-inf",
        PosInf => "+inf",
        Zero => "0",
        Number => "numbers",
        NaN => "NaN",
    }
}

fn is_inf(h: Held) -> bool {
    matches!(h, NegInf | PosInf)
}

fn neg(h: Held) -> Held {
    match h {
        NegInf => PosInf,
        PosInf => NegInf,
        other => other,
    }
}

fn scale(x: Held, f: f64) -> Held {
    match x {
        NegInf | PosInf if f > 0.0 => x,
        NegInf | PosInf if f < 0.0 => neg(x),
        NegInf | PosInf => NaN,
        other => other,
    }
}

fn unary(f: UnaryFn, x: Held) -> Held {
    match (f, x) {
        (_, NaN) => NaN,
        (UnaryFn::Exp, NegInf) => Zero,
        (UnaryFn::Exp, PosInf) => PosInf,
        (UnaryFn::Exp, _) => Number,
        (UnaryFn::Log, Zero) => NegInf,
        (UnaryFn::Log, PosInf) => PosInf,
        (UnaryFn::Log, NegInf) => NaN,
        (UnaryFn::Log, _) => Number,
        // gelu(-inf) and silu(-inf) are -inf * 0; at +inf both are +inf.
        (UnaryFn::Gelu | UnaryFn::Silu, NegInf) => NaN,
        (UnaryFn::Gelu | UnaryFn::Silu, PosInf) => PosInf,
        (UnaryFn::Gelu | UnaryFn::Silu, Zero) => Zero,
        (UnaryFn::Gelu | UnaryFn::Silu, Number) => Number,
    }
}

fn binary(f: BinaryFn, a: Held, b: Held) -> Held {
    if a == NaN || b == NaN {
        return NaN;
    }
    match f {
        BinaryFn::Add => match (a, b) {
            (Zero, x) | (x, Zero) => x,
            (NegInf, PosInf) | (PosInf, NegInf) => NaN,
            (x, _) | (_, x) if is_inf(x) => x,
            _ => Number,
        },
        BinaryFn::Sub => binary(BinaryFn::Add, a, neg(b)),
        BinaryFn::Mul => match (a, b) {
            (Zero, x) | (x, Zero) if is_inf(x) => NaN,
            (Zero, _) | (_, Zero) => Zero,
            (x, y) if is_inf(x) && is_inf(y) => {
                if x == y {
                    PosInf
                } else {
                    NegInf
                }
            }
            // An infinity times a number of unknown sign (or 0).
            (x, _) | (_, x) if is_inf(x) => NaN,
            _ => Number,
        },
        BinaryFn::Div => match (a, b) {
            (_, Zero) => NaN,
            (x, _) if is_inf(x) => NaN,
            (_, y) if is_inf(y) => Zero,
            (Zero, _) => Zero,
            _ => Number,
        },
        BinaryFn::Max => match (a, b) {
            (NegInf, x) | (x, NegInf) => x,
            (PosInf, _) | (_, PosInf) => PosInf,
            (Zero, Zero) => Zero,
            _ => Number,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_softmax_chain_ends_in_an_lse_of_minus_infinity() {
        // s masked; m = max s; p = exp(s - m); l = sum p; u = p v; o = u / l; lse = m + log l.
        let s = NegInf;
        let m = s;
        let d = binary(BinaryFn::Sub, s, m);
        assert_eq!(d, NaN, "a fully masked row of a naive softmax is NaN");
        // With the row maximum of the unsplit kernel (a number), the weights are zeros.
        let p = unary(UnaryFn::Exp, binary(BinaryFn::Sub, s, Number));
        assert_eq!(p, Zero);
        assert_eq!(binary(BinaryFn::Div, Zero, Zero), NaN);
        assert_eq!(
            binary(BinaryFn::Add, NegInf, unary(UnaryFn::Log, Zero)),
            NegInf
        );
    }

    #[test]
    fn a_shift_by_a_masked_maximum_is_infinite() {
        // p = exp(s - m) with m the row maximum of the masked scores but s unmasked: in a
        // fully masked row s - m = +inf, and u / l = inf / inf.
        let d = binary(BinaryFn::Sub, Number, NegInf);
        assert_eq!(d, PosInf);
        let p = unary(UnaryFn::Exp, d);
        assert_eq!(binary(BinaryFn::Div, p, p), NaN);
    }

    #[test]
    fn max_with_the_unmasked_scores_keeps_numbers() {
        assert_eq!(binary(BinaryFn::Max, NegInf, Number), Number);
        assert_eq!(binary(BinaryFn::Max, Number, NegInf), Number);
        assert_eq!(binary(BinaryFn::Max, NegInf, NegInf), NegInf);
    }
}
