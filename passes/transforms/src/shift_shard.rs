//! `shift-shard`: the headline schedule. Distributes the largest spatial axis of the output
//! over every mesh level (tile + parallelize, sharding what it indexes), then, for each input
//! shared by all ranks, tiles an axis the output does not have (the reduction) the same way,
//! shifts each of its loops by the parallel loop of the same level and shards the shared
//! inputs along it: their pieces stay distributed and travel around rings, level by level.
//! On a 1-D mesh attention becomes RingAttention; on a 2-level mesh the two-level shift
//! (LoongTrain). Causal attention gets zigzag (head-tail) placements of its query and key
//! positions (`balance.rs`; off with `balance=false`): every rank does the same work at every
//! step, and inputs the operator declares contiguous are permuted at the start (outputs back
//! at the end). Attention under a window with a finite left side (`window = [left, right]`,
//! `left >= 0`; issue 43) keeps contiguous positions and, on a 1-D mesh, starts each rank's
//! ring at the first piece its window reaches ([`lookback`]): the ring then visits the pieces
//! the window reaches in order, and those after the last one it reaches are seen by no query
//! of the rank, so the lowering sends none of them (`dead_transfers.rs`). A look-back window
//! inside one shard is one neighbour exchange, a two-sided one two.

use crate::balance::{causal_attention, place_zigzag};
use crate::util::{err_at, fresh_name, PlacementOption};
use crate::{parallelize::Parallelize, shard::Shard, shift::Shift, tile::Tile};
use mercury_commir::kernel_pass;
use mercury_commir::pass::{model, KernelPass};
use mercury_commir::Kernel;
use mercury_commir::{AxisKind, Role};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `shift-shard`.
    pub struct ShiftShard = "shift-shard", "Parallelize the output's largest spatial axis over the mesh and shift + shard the shared inputs (RingAttention, LoongTrain)", {
        axis: String = "" => "spatial axis to distribute (default: the largest that divides)",
        balance: bool = "true" => "place a causal attention's query and key positions zigzag over the ring (load balancing)",
    }
}

/// Splits `axis` into one loop per mesh level (`<axis>0`, `<axis>1`, ...) and a block `<axis>_t`;
/// returns the loop axes.
fn tile_over_mesh(
    module: &mut Operation,
    kernel: &str,
    axis: &str,
    mesh: &[usize],
) -> Result<Vec<String>, Diagnostic> {
    let mut cur = axis.to_string();
    let mut loops = Vec::new();
    for (l, &s) in mesh.iter().enumerate() {
        // Fresh names: the user's symbols are never reused.
        let m = model(module, kernel)?;
        let outer = fresh_name(&m, &format!("{axis}{l}"));
        let inner = fresh_name(
            &m,
            &if l + 1 == mesh.len() {
                format!("{axis}_t")
            } else {
                format!("{axis}_r{l}")
            },
        );
        Tile {
            axis: cur.clone(),
            factor: s,
            outer: outer.clone(),
            inner: inner.clone(),
        }
        .apply_to(module, kernel)?;
        loops.push(outer);
        cur = inner;
    }
    Ok(loops)
}

/// Why no spatial axis of the outputs can be distributed over the `n` devices: the axes that
/// divide by `n` but into blocks below their declared minimum (`min B`; a note at each such
/// declaration), then those that do not divide. Located at the kernel.
fn no_axis_fits(m: &Kernel, outputs: &[&mercury_commir::Buffer], n: usize) -> Diagnostic {
    let (small, uneven): (Vec<&mercury_commir::Axis>, Vec<&mercury_commir::Axis>) = m
        .axes
        .iter()
        .filter(|a| a.kind == AxisKind::Spatial && outputs.iter().any(|b| b.uses_axis(&a.name)))
        .partition(|a| a.extent.is_multiple_of(n));
    let mesh = &m.mesh.name;
    let listed = |axes: &[&mercury_commir::Axis]| {
        axes.iter()
            .map(|a| format!("'@{}' = {}", a.name, a.extent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let message = if small.is_empty() {
        let why = if uneven.is_empty() {
            "the output has no spatial axis".to_string()
        } else {
            format!("{} not a multiple of {n}", listed(&uneven))
        };
        format!("shift-shard: no spatial axis of the output divides over the {n} devices of '@{mesh}': {why}")
    } else {
        let blocks = small
            .iter()
            .map(|a| {
                format!(
                    "'@{}' = {} divides into blocks of {}, below its minimum block of {} ('min {}')",
                    a.name,
                    a.extent,
                    a.extent / n,
                    a.min_block,
                    a.min_block
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let others = if uneven.is_empty() {
            String::new()
        } else {
            format!(
                "; the other spatial axes of the output ({}) are not multiples of {n}",
                listed(&uneven)
            )
        };
        format!("shift-shard: no spatial axis of the output can be distributed over the {n} devices of '@{mesh}': {blocks}{others}")
    };
    small
        .iter()
        .fold(Diagnostic::error(m.loc.clone(), message), |d, a| {
            d.with_note(
                a.loc.clone(),
                format!("'@{}' declares its minimum block here", a.name),
            )
        })
}

impl KernelPass for ShiftShard {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        if !m.loops().is_empty() {
            return Err(Diagnostic::error(m.loc.clone(), "shift-shard: expects a local operator without loops (apply the primitives one by one instead)"));
        }
        let n = m.mesh.num_devices();
        let outputs: Vec<_> = m
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::Out | Role::InOut))
            .collect();
        let fits =
            |a: &mercury_commir::Axis| a.extent.is_multiple_of(n) && a.extent / n >= a.min_block;
        // An axis whose dimension already carries a buffer's sharding keeps that placement.
        let sharded_axis = |b: &mercury_commir::Buffer| -> Option<String> {
            b.dims.iter().zip(&b.sharding).find_map(|(d, s)| match d {
                mercury_commir::DimBinding::Axes(ax) if !s.is_empty() && ax.len() == 1 => {
                    Some(ax[0].clone())
                }
                _ => None,
            })
        };
        let par = if self.axis.is_empty() {
            let placed = outputs
                .iter()
                .filter_map(|b| sharded_axis(b))
                .filter_map(|a| m.axis(&a))
                .find(|a| a.kind == AxisKind::Spatial && fits(a))
                .map(|a| a.name.clone());
            match placed {
                Some(a) => a,
                None => m
                    .axes
                    .iter()
                    .filter(|a| {
                        a.kind == AxisKind::Spatial
                            && outputs.iter().any(|b| b.uses_axis(&a.name))
                            && fits(a)
                    })
                    .max_by_key(|a| {
                        (
                            a.extent,
                            std::cmp::Reverse(m.axes.iter().position(|x| x.name == a.name)),
                        )
                    })
                    .map(|a| a.name.clone())
                    .ok_or_else(|| no_axis_fits(m, &outputs, n))?,
            }
        } else {
            let a = m.axis(&self.axis).ok_or_else(|| {
                err_at(
                    &m.loc,
                    format!("shift-shard: '@{}' is not an axis", self.axis),
                )
            })?;
            if a.kind != AxisKind::Spatial || !fits(a) {
                return Err(Diagnostic::error(a.loc.clone(), format!("shift-shard: '@{}' must be a spatial axis whose extent divides over {n} devices in blocks of at least {}", a.name, a.min_block)));
            }
            a.name.clone()
        };
        // Shared inputs: read by every rank because they do not use the parallel axis.
        let mut shift_axes: Vec<String> = Vec::new();
        let mut shared_by_axis: Vec<(String, Vec<String>)> = Vec::new();
        for b in m
            .buffers
            .iter()
            .filter(|b| b.role == Role::In && !b.uses_axis(&par))
        {
            let placed = sharded_axis(b)
                .and_then(|a| m.axis(&a).cloned())
                .filter(|a| a.kind != AxisKind::Reduction && fits(a));
            let cand = placed.or_else(|| {
                b.axis_slots()
                    .into_iter()
                    .map(|(_, a)| a)
                    .filter(|a| !outputs.iter().any(|o| o.uses_axis(a)))
                    .filter_map(|a| m.axis(&a).cloned())
                    .filter(|a| a.kind != AxisKind::Reduction && fits(a))
                    .max_by_key(|a| a.extent)
            });
            if let Some(a) = cand {
                if !shift_axes.contains(&a.name) {
                    shift_axes.push(a.name.clone());
                    shared_by_axis.push((a.name.clone(), vec![]));
                }
                if let Some(e) = shared_by_axis.iter_mut().find(|e| e.0 == a.name) {
                    e.1.push(b.name.clone());
                }
            }
        }
        let mesh = m.mesh.shape.clone();
        let par_loops = tile_over_mesh(module, &m.name, &par, &mesh)?;
        for (l, a) in par_loops.iter().enumerate() {
            Parallelize {
                axis: a.clone(),
                level: crate::util::Level::Index(l),
                shard: true,
                placement: PlacementOption(None),
            }
            .apply_to(module, &m.name)?;
        }
        let window = lookback(m);
        for (axis, bufs) in &shared_by_axis {
            // Splitting the axis may not be legal for this body (a contraction whose partial
            // sums feed an epilogue before they are reduced: gelu(A B) stored); then the
            // shared inputs are not ringed over it: every rank reads them whole.
            let before = module.clone();
            // A look-back window on a 1-D mesh: rank p starts at piece p - w, w the pieces
            // the window reaches before the rank's own.
            let offset = match (window, mesh.as_slice(), m.axis(axis)) {
                (Some(left), [n], Some(a)) if *n > 1 => {
                    let piece = (a.extent / n).max(1);
                    let w = left.div_ceil(piece).min(n - 1);
                    (n - w) % n
                }
                _ => 0,
            };
            if ring_over(module, &m.name, axis, bufs, &par_loops, &mesh, offset).is_err() {
                *module = before;
                shift_axes.retain(|a| a != axis);
            }
        }
        // Causal attention around a ring: zigzag placements give every rank the same work
        // at every step (a contiguous ring leaves the first ranks idle).
        if self.balance && n > 1 && window.is_none() {
            if let Some(seq) = causal_attention(m) {
                if seq.q_axis == par && shift_axes.contains(&seq.k_axis) {
                    place_zigzag(module, &m.name, m, &seq)?;
                }
            }
        }
        Ok(())
    }
}

/// The look-back of the first attention patch (forward or backward) of `m` with a window of
/// finite left side (`window = [left, right]`, `left >= 0`; any `right`): `left`. `None` for
/// any other operator.
fn lookback(m: &Kernel) -> Option<usize> {
    let mut out = None;
    let mut seen = false;
    m.walk(&mut |s, _| {
        if let mercury_commir::Stmt::Patch { kernel, attrs, .. } = s {
            if seen || !(kernel == "attention" || kernel == "attention_bwd") {
                return;
            }
            seen = true;
            if let Some([l, _]) = attrs
                .get("window")
                .and_then(|a| a.as_int_array())
                .as_deref()
            {
                if *l >= 0 {
                    out = Some(*l as usize);
                }
            }
        }
    });
    out
}

/// Tiles `axis` over the mesh levels, shifts each of its loops by the parallel loop of the
/// same level (`par_loops`) and shards the shared inputs `bufs` along it (a buffer already
/// placed over that level elsewhere keeps its placement): their pieces travel around rings.
fn ring_over(
    module: &mut Operation,
    kernel: &str,
    axis: &str,
    bufs: &[String],
    par_loops: &[String],
    mesh: &[usize],
    offset: usize,
) -> Result<(), Diagnostic> {
    let loops = tile_over_mesh(module, kernel, axis, mesh)?;
    for (l, a) in loops.iter().enumerate() {
        Shift {
            axis: a.clone(),
            by: par_loops[l].clone(),
            offset,
            nth: None,
        }
        .apply_to(module, kernel)?;
        for b in bufs {
            // A buffer already placed over this level elsewhere keeps its placement.
            let cur = model(module, kernel)?;
            let buf = cur.buffer(b).expect("buffer");
            let dim = buf.dim_of_axis(a).expect("tiled axis");
            if buf
                .sharding
                .iter()
                .enumerate()
                .any(|(d, s)| d != dim && s.contains(&l))
            {
                continue;
            }
            Shard {
                buffer: b.clone(),
                axis: a.clone(),
                level: Some(crate::util::Level::Index(l)),
                placement: PlacementOption(None),
            }
            .apply_to(module, kernel)?;
        }
    }
    Ok(())
}
