//! `--balance-documents`: the run's batch of packed documents reordered by
//! [`mercury_plan::balance`] so that the ranks holding the queries' shards do about the same
//! attention work, before the run (both backends, and the `--check` reference with them).

use mercury_plan::balance::{balance_documents, Layout, RowMask};
use mercury_plan::{ComputeOp, Plan};
use std::collections::HashMap;
use std::ops::Range;

/// Reorders the documents of the plan's one self-attention documents input in `inputs` (prefix
/// sums as f64, a padding tail kept at the end) and says what it gained; a line saying why not
/// when the plan has no such input, has several, or does not shard its queries' positions over
/// its ranks (heads-parallel attention is balanced as it is).
pub fn reorder(plan: &Plan, inputs: &mut HashMap<String, Vec<f64>>) -> Result<String, String> {
    if plan.documents.is_empty() {
        return Ok(
            "// --balance-documents: the operator has no documents input (nothing to reorder)"
                .into(),
        );
    }
    let Some((doc, layout, mask)) = layout_of(plan)? else {
        return Ok(
            "// --balance-documents: the plan does not split its queries' positions over its ranks (nothing to balance)"
                .into(),
        );
    };
    let d = &plan.documents[doc];
    let given = inputs
        .get(&d.name)
        .ok_or_else(|| format!("--balance-documents: no boundaries for @{}", d.name))?;
    let b = mercury_plan::mask::Boundaries::from_f64(given, d.positions)
        .map_err(|m| format!("--balance-documents: @{}: {m}", d.name))?;
    let lengths: Vec<usize> = (0..b.len()).map(|i| b.range(i).len()).collect();
    let found = balance_documents(&lengths, &layout, mask)?;
    let mut sums = Vec::with_capacity(lengths.len() + 1);
    let mut at = 0usize;
    sums.push(0.0);
    for &i in &found.order {
        at += lengths[i];
        sums.push(at as f64);
    }
    inputs.insert(d.name.clone(), sums);
    Ok(format!(
        "// documents @{} reordered for {} ranks (--balance-documents): busiest rank {:.3}x -> {:.3}x the mean (query rows' visible keys)",
        d.name, layout.ranks, found.before, found.after
    ))
}

/// The documents input (index into `plan.documents`) of the plan's self-attention patches,
/// which positions each rank's query rows cover, and the row mask; `None` when the queries'
/// positions are not split over the ranks (every position held by exactly one rank).
fn layout_of(plan: &Plan) -> Result<Option<(usize, Layout, RowMask)>, String> {
    let mut doc = None;
    let mut mask = None;
    let mut held: Vec<(Range<usize>, usize)> = Vec::new();
    for (rank, r) in plan.ranks.iter().enumerate() {
        for op in r.stages.iter().flat_map(|s| &s.compute) {
            let ComputeOp::Patch { patch, inputs, .. } = op else {
                continue;
            };
            let (Some(m), Some((_, q0, _))) = (patch.mask(), patch.attention_band()) else {
                continue;
            };
            let Some([dq, dk]) = m.documents else {
                continue;
            };
            if dq != dk {
                return Err(
                    "--balance-documents: the plan's attention has separate query and key documents (cross-attention); only self-attention's documents are reordered"
                        .into(),
                );
            }
            if doc.is_some_and(|d| d != dq) {
                return Err("--balance-documents: the plan has several documents inputs".into());
            }
            doc = Some(dq);
            let this = RowMask {
                causal: patch.causal_offsets().is_some(),
                left: m.left,
                right: m.right,
            };
            if mask.is_some_and(|x| x != this) {
                return Err(
                    "--balance-documents: the plan's attention patches have different masks".into(),
                );
            }
            mask = Some(this);
            let q = &inputs[0].region.extent;
            held.push((q0..q0 + q[q.len() - 2], rank));
        }
    }
    let (Some(doc), Some(mask)) = (doc, mask) else {
        return Ok(None);
    };
    // Each rank's query positions, merged; a position two ranks hold means the queries are not
    // split by position (heads, or a 2-level split): no layout.
    held.sort_by_key(|(r, rank)| (r.start, *rank));
    held.dedup();
    let mut pieces: Vec<(Range<usize>, usize)> = Vec::new();
    for (r, rank) in held {
        match pieces.last_mut() {
            Some((p, k)) if *k == rank && p.end >= r.start => p.end = p.end.max(r.end),
            Some((p, _)) if p.end > r.start => return Ok(None),
            _ => pieces.push((r, rank)),
        }
    }
    let positions = plan.documents[doc].positions;
    let covered = pieces.first().is_some_and(|(p, _)| p.start == 0)
        && pieces.windows(2).all(|w| w[0].0.end == w[1].0.start)
        && pieces.last().is_some_and(|(p, _)| p.end == positions);
    if !covered {
        return Ok(None);
    }
    let layout = Layout::from_pieces(pieces, plan.ranks.len())?;
    Ok(Some((doc, layout, mask)))
}
