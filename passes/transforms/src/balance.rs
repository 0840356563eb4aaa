//! `balance-causal`: load-balanced causal attention. The buffer dimensions that hold the query
//! and key positions of a causal attention patch are placed zigzag (head-tail, as torch's
//! context parallelism does) over the mesh levels that split them, so that every rank does the
//! same share of the causal mask's work at every ring step. `shift-shard` applies it on its own
//! to causal attention; the search tries every ring candidate with it too.

use crate::reshard::{At, Reshard, ShardingOption};
use crate::util::{buffer_op_mut, err_at, set_placement};
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, model, KernelPass};
use mercury_commir::placement::flatten_splits;
use mercury_commir::{DimBinding, Kernel, Placement, Role, Split, Stmt};
use mercury_ir::{Diagnostic, Operation, ValueId};

/// The sequence dimensions of a causal attention patch (forward or backward).
#[derive(Debug, Clone, PartialEq)]
pub struct CausalSeq {
    /// The (outermost) axis of the query positions (Q's and the output's sequence dimension).
    pub q_axis: String,
    /// The (outermost) axis of the key positions (K's and V's).
    pub k_axis: String,
    /// (buffer, dimension) of every buffer that holds query or key positions: Q, K, V and the
    /// output (and the log-sum-exp it keeps) of a forward; Q, K, V, O, dO, LSE and the
    /// gradients dQ, dK, dV of a backward; in that order.
    pub dims: Vec<(String, usize)>,
}

/// The causal attention patch of `m` (the first forward or backward one), if any: the buffers
/// it loads and reduces into with their sequence dimensions (the dimension bound first to
/// the query or key axis: `@i` before tiling, `@i0` after).
pub fn causal_attention(m: &Kernel) -> Option<CausalSeq> {
    let mut loads = Vec::new();
    let mut reduces = Vec::new();
    let mut patch = None;
    m.walk(&mut |s, _| match s {
        Stmt::Load { result, access } => loads.push((*result, access.buffer.clone())),
        Stmt::Reduce {
            values,
            access,
            lse,
            ..
        } => {
            reduces.push((values.clone(), access.buffer.clone()));
            if let Some(l) = lse {
                reduces.push((values[1..].to_vec(), l.buffer.clone()));
            }
        }
        Stmt::Patch {
            kernel,
            inputs,
            outputs,
            attrs,
            ..
        } if patch.is_none()
            && (kernel == "attention" || kernel == "attention_bwd")
            && attrs.get("causal").and_then(|a| a.as_bool()) == Some(true) =>
        {
            patch = Some((inputs.clone(), outputs.clone()))
        }
        _ => {}
    });
    let (inputs, outputs) = patch?;
    let load = |v: &ValueId| loads.iter().find(|(r, _)| r == v).map(|(_, b)| b.clone());
    let reduced = |v: &ValueId| {
        reduces
            .iter()
            .find(|(vals, _)| vals.first() == Some(v))
            .map(|(_, b)| b.clone())
    };
    // The axis the (outermost) sequence dimension of a 3- or 4-D tile's buffer is bound to.
    let seq_axis = |b: &str| -> Option<String> {
        let buf = m.buffer(b)?;
        match &buf.dims[buf.dims.len().checked_sub(2)?] {
            DimBinding::Axes(ax) => Some(ax[0].clone()),
            _ => None,
        }
    };
    let q_axis = seq_axis(&load(inputs.first()?)?)?;
    let k_axis = seq_axis(&load(inputs.get(1)?)?)?;
    // Query-side and key-side buffers: the forward's q; k, v; o (and its kept lse); the
    // backward's q; k, v; o, do, lse; dq; dk, dv.
    let mut bufs: Vec<String> = inputs.iter().filter_map(load).collect();
    bufs.extend(outputs.iter().filter_map(reduced));
    let mut dims = Vec::new();
    for b in bufs {
        let buf = m.buffer(&b)?;
        let d = buf.dims.iter().position(
            |d| matches!(d, DimBinding::Axes(ax) if ax[0] == q_axis || ax[0] == k_axis),
        )?;
        if !dims.iter().any(|(x, _)| *x == b) {
            dims.push((b, d));
        }
    }
    // The forward needs q, k, v and its output; the backward q, k, v, o, do, lse and its
    // three gradients.
    let want = if outputs.len() == 3 { 9 } else { 4 };
    (dims.len() >= want).then_some(CausalSeq {
        q_axis,
        k_axis,
        dims,
    })
}

/// Places `seq`'s dimensions zigzag over the mesh levels that split them in the kernel
/// `kernel` of `module` (a flat zigzag over those levels), keeping the operator's contract
/// (`declared`, its model before scheduling): a dimension the operator declares contiguous is
/// resharded at the kernel's start (and an output back at its end), one it declares replicated
/// is declared zigzag (an output declared replicated stays replicated), one already zigzag or
/// striped stays. Changes nothing and returns
/// `Ok(false)` when a dimension is not split or the positions do not divide into zigzag chunks.
pub fn place_zigzag(
    module: &mut Operation,
    kernel: &str,
    declared: &Kernel,
    seq: &CausalSeq,
) -> Result<bool, Diagnostic> {
    let cur = model(module, kernel)?;
    let mut plans = Vec::new();
    for (b, d) in &seq.dims {
        let (Some(buf), Some(decl)) = (cur.buffer(b), declared.buffer(b)) else {
            return Ok(false);
        };
        let p = buf.placement();
        let levels = p.levels[*d].clone();
        if levels.is_empty() && buf.role != Role::In {
            // An output declared replicated along the positions stays so: each rank computes
            // its zigzag rows and the lowering delivers the whole output.
            continue;
        }
        if levels.is_empty() {
            return Ok(false);
        }
        let mut target = p.clone();
        target
            .splits
            .extend(flatten_splits(Split::Zigzag, &levels, &cur.mesh.shape));
        let target = Placement::new(target.levels, target.splits);
        if mercury_commir::model::check_placement(b, &target, &cur.shape(buf), &cur.mesh).is_err() {
            return Ok(false);
        }
        let d_decl = decl.placement();
        let declared_dim = d_decl.dim(*d);
        plans.push((b.clone(), buf.role, p, target, declared_dim));
    }
    let mut ends = Vec::new();
    for (b, role, p, target, declared_dim) in plans {
        if declared_dim.is_empty() {
            let k = kernel_mut(module, kernel);
            let op = buffer_op_mut(k, &b).and_then(BufferOp::cast);
            set_placement(&mut op.expect("buffer"), &target);
        } else if declared_dim.iter().all(|(_, s)| *s == Split::Block) {
            Reshard {
                buffer: b.clone(),
                sharding: ShardingOption(target),
                at: At::Begin,
            }
            .apply_to(module, kernel)?;
            if role != Role::In {
                ends.push((b, p));
            }
        }
    }
    for (b, p) in ends {
        Reshard {
            buffer: b,
            sharding: ShardingOption(p),
            at: At::End,
        }
        .apply_to(module, kernel)?;
    }
    Ok(true)
}

kernel_pass! {
    /// `balance-causal` takes no options of its own.
    pub struct BalanceCausal = "balance-causal", "Place a causal attention's query and key positions zigzag (head-tail) over the levels that split them; contiguous declarations are resharded", {}
}

impl KernelPass for BalanceCausal {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let seq = causal_attention(m).ok_or_else(|| {
            err_at(
                &m.loc,
                format!(
                    "balance-causal: '@{}' has no causal attention patch",
                    m.name
                ),
            )
        })?;
        if !place_zigzag(module, &m.name, m, &seq)? {
            return Err(err_at(
                &m.loc,
                format!(
                    "balance-causal: the query and key positions of '@{}' are not split over the mesh, or do not divide into 2 chunks per rank",
                    m.name
                ),
            ));
        }
        Ok(())
    }
}
