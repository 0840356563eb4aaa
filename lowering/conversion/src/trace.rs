//! Symbolic execution: the loop nest run for one rank (parallel loops take the rank's mesh
//! coordinate, sequential loops iterate), recording every statement instance as an [`Event`]
//! with the box it touches and its stage.

use crate::context::{err, Event};
use mercury_commir::{DimBinding, IndexExpr, Kernel, Stmt};
use mercury_ir::{Diagnostic, Location};
use mercury_plan::Region;
use std::collections::HashMap;

/// Upper bound on iterations a rank executes symbolically.
const MAX_EVENTS: usize = 1 << 20;

/// The box an access touches for the loop variables in `env`.
pub(crate) fn access_box(
    k: &Kernel,
    buffer: &str,
    indices: &[IndexExpr],
    env: &HashMap<String, i64>,
    loc: &Location,
) -> Result<(Region, bool), Diagnostic> {
    let b = k
        .buffer(buffer)
        .ok_or_else(|| err(loc, format!("unknown buffer '@{buffer}'")))?;
    let mut offset = Vec::new();
    let mut extent = Vec::new();
    let mut slot = 0;
    let mut shifted = false;
    for d in &b.dims {
        match d {
            DimBinding::Fixed(n) => {
                offset.push(0);
                extent.push(*n as usize);
            }
            DimBinding::Axes(axes) => {
                let exts: Vec<usize> = axes.iter().map(|a| k.extent(a)).collect();
                let mut off = 0usize;
                let mut ext = exts.iter().product::<usize>();
                for (pos, _a) in axes.iter().enumerate() {
                    let e = &indices[slot];
                    slot += 1;
                    let looped =
                        e.axes().iter().all(|x| env.contains_key(*x)) && !e.axes().is_empty();
                    if looped {
                        shifted |= e.as_axis().is_none();
                        let v = e.eval(env).ok_or_else(|| {
                            err(loc, format!("cannot evaluate index '{}'", e.to_custom()))
                        })?;
                        let stride: usize = exts[pos + 1..].iter().product();
                        if v < 0 || v as usize >= exts[pos] {
                            return Err(err(
                                loc,
                                format!(
                                    "index '{}' = {v} is out of range 0..{}",
                                    e.to_custom(),
                                    exts[pos]
                                ),
                            ));
                        }
                        off += v as usize * stride;
                        ext = stride;
                    }
                }
                offset.push(off);
                extent.push(ext);
            }
        }
    }
    Ok((Region { offset, extent }, shifted))
}

/// Executes the loop nest symbolically for one rank; events are tagged with their stage
/// (1-based; stage 0 is the prologue), in program order, so their stages never decrease
/// ([`stage_starts`] relies on it).
pub(crate) fn trace(
    k: &Kernel,
    coords: &[usize],
) -> Result<(Vec<(usize, Event)>, usize), Diagnostic> {
    fn walk(
        k: &Kernel,
        stmts: &[Stmt],
        coords: &[usize],
        env: &mut HashMap<String, i64>,
        levels: &mut Vec<usize>,
        stage: &mut usize,
        out: &mut Vec<(usize, Event)>,
    ) -> Result<(), Diagnostic> {
        for s in stmts {
            if out.len() > MAX_EVENTS {
                return Err(err(
                    &k.loc,
                    "the loop nest has too many iterations to lower (tile coarser)",
                ));
            }
            match s {
                Stmt::For(l) => {
                    if let Some(level) = l.parallel {
                        env.insert(l.axis.clone(), coords[level] as i64);
                        levels.push(level);
                        walk(k, &l.body, coords, env, levels, stage, out)?;
                        levels.pop();
                        env.remove(&l.axis);
                    } else {
                        let innermost = !l.body.iter().any(contains_sequential);
                        for t in 0..k.extent(&l.axis) {
                            env.insert(l.axis.clone(), t as i64);
                            walk(k, &l.body, coords, env, levels, stage, out)?;
                            if innermost {
                                *stage += 1;
                            }
                        }
                        env.remove(&l.axis);
                    }
                }
                Stmt::Load { result, access } => {
                    let (bx, shifted) =
                        access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Load {
                            buffer: access.buffer.clone(),
                            bx,
                            value: *result,
                            shifted,
                            loc: access.loc.clone(),
                        },
                    ));
                }
                Stmt::Patch {
                    kernel,
                    inputs,
                    outputs,
                    attrs,
                    loc,
                } => out.push((
                    *stage,
                    Event::Patch {
                        kernel: kernel.clone(),
                        inputs: inputs.clone(),
                        outputs: outputs.clone(),
                        attrs: attrs.iter().map(|(a, b)| (a.clone(), b.clone())).collect(),
                        loc: loc.clone(),
                    },
                )),
                Stmt::Compute {
                    op,
                    inputs,
                    output,
                    ty,
                    loc,
                } => out.push((
                    *stage,
                    Event::Compute {
                        op: op.clone(),
                        inputs: inputs.clone(),
                        output: *output,
                        ty: ty.clone(),
                        loc: loc.clone(),
                    },
                )),
                Stmt::Reduce {
                    kind,
                    values,
                    access,
                    carry,
                    ..
                } => {
                    let (bx, shifted) =
                        access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Reduce {
                            kind: *kind,
                            values: values.clone(),
                            buffer: access.buffer.clone(),
                            bx,
                            shifted,
                            levels: levels.clone(),
                            carry: *carry,
                            loc: access.loc.clone(),
                        },
                    ));
                }
                Stmt::Store { value, access } => {
                    let (bx, _) = access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Store {
                            value: *value,
                            buffer: access.buffer.clone(),
                            bx,
                            loc: access.loc.clone(),
                        },
                    ));
                }
                Stmt::Reshard { .. } => {}
            }
        }
        Ok(())
    }
    fn contains_sequential(s: &Stmt) -> bool {
        match s {
            Stmt::For(l) => l.parallel.is_none() || l.body.iter().any(contains_sequential),
            _ => false,
        }
    }
    let mut out = Vec::new();
    let mut stage = 1;
    let mut env = HashMap::new();
    walk(
        k,
        &k.body,
        coords,
        &mut env,
        &mut Vec::new(),
        &mut stage,
        &mut out,
    )?;
    debug_assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    let last = out.iter().map(|(s, _)| *s).max().unwrap_or(1);
    Ok((out, last))
}

/// Where each stage's events start in a rank's trace (as [`trace`] makes it: in stage order):
/// entry `s` is the index of the first event of stage `s` or later, for `s` in
/// `0..=last + 1`, so stage `s`'s events are `starts[s]..starts[s + 1]`.
pub(crate) fn stage_starts(trace: &[(usize, Event)], last: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(last + 2);
    let mut i = 0;
    for s in 0..=last + 1 {
        while i < trace.len() && trace[i].0 < s {
            i += 1;
        }
        starts.push(i);
    }
    starts
}
