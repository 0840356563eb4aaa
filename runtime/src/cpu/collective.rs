//! One collective instance, every member at once: each member's part is read, combined as
//! the collective says and written where each member wants it.

use super::compute::combine;
use super::mem::{concat, split, Mem};
use mercury_plan::*;

pub(super) fn run_collective(
    plan: &Plan,
    mem: &mut Mem,
    group: &[usize],
    ops: &[&Collective],
) -> Result<(), String> {
    let n = group.len();
    match ops[0] {
        Collective::AllGather { axis, .. } => {
            let parts: Vec<Vec<f64>> = group
                .iter()
                .zip(ops)
                .map(|(r, c)| {
                    if let Collective::AllGather { src, .. } = c {
                        mem.read(plan, *r, src)
                    } else {
                        vec![]
                    }
                })
                .collect();
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllGather { src, dst, .. } = c {
                    if dst.region.extent[*axis] != src.region.extent[*axis] * n {
                        return Err("all_gather destination has the wrong size".into());
                    }
                    let full = concat(&parts, &src.region.extent, *axis);
                    mem.write(plan, *r, dst, &full);
                }
            }
        }
        Collective::AllReduce { kind, .. } => {
            let mut acc: Option<Vec<Vec<f64>>> = None;
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllReduce { bufs, .. } = c {
                    let vals: Vec<Vec<f64>> = bufs.iter().map(|b| mem.read(plan, *r, b)).collect();
                    match acc.as_mut() {
                        None => acc = Some(vals),
                        Some(a) => combine(*kind, a, &vals),
                    }
                }
            }
            let acc = acc.ok_or("empty all_reduce")?;
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllReduce { bufs, .. } = c {
                    for (b, v) in bufs.iter().zip(&acc) {
                        mem.write(plan, *r, b, v);
                    }
                }
            }
        }
        Collective::ReduceScatter { axis, kind, .. } => {
            let mut acc: Option<Vec<Vec<f64>>> = None;
            let mut shape = vec![];
            for (r, c) in group.iter().zip(ops) {
                if let Collective::ReduceScatter { src, .. } = c {
                    shape = src.region.extent.clone();
                    let vals = vec![mem.read(plan, *r, src)];
                    match acc.as_mut() {
                        None => acc = Some(vals),
                        Some(a) => combine(*kind, a, &vals),
                    }
                }
            }
            let acc = acc.ok_or("empty reduce_scatter")?;
            let chunks = split(&acc[0], &shape, *axis, n)?;
            for ((r, c), chunk) in group.iter().zip(ops).zip(chunks) {
                if let Collective::ReduceScatter { dst, .. } = c {
                    mem.write(plan, *r, dst, &chunk);
                }
            }
        }
        Collective::AllToAll {
            split_axis,
            concat_axis,
            ..
        } => {
            let sent: Vec<Vec<Vec<f64>>> = group
                .iter()
                .zip(ops)
                .map(|(r, c)| {
                    if let Collective::AllToAll { src, .. } = c {
                        split(&mem.read(plan, *r, src), &src.region.extent, *split_axis, n)
                    } else {
                        Ok(vec![])
                    }
                })
                .collect::<Result<_, String>>()?;
            for (q, (r, c)) in group.iter().zip(ops).enumerate() {
                if let Collective::AllToAll { src, dst, .. } = c {
                    let mut chunk_shape = src.region.extent.clone();
                    chunk_shape[*split_axis] /= n;
                    let recv: Vec<Vec<f64>> = (0..n).map(|p| sent[p][q].clone()).collect();
                    let full = concat(&recv, &chunk_shape, *concat_axis);
                    if full.len() != dst.region.numel() {
                        return Err("all_to_all destination has the wrong size".into());
                    }
                    mem.write(plan, *r, dst, &full);
                }
            }
        }
        Collective::Reduce { root, kind, .. } => {
            // Every member's source combined in group order, stored in the root's dst.
            let root_rank = *group.get(*root).ok_or("reduce root outside the group")?;
            if *kind != CombineKind::Add {
                return Err("a reduce with lse merge needs [o, lse] pairs".into());
            }
            let mut acc: Option<Vec<Vec<f64>>> = None;
            let mut dst = None;
            for (r, c) in group.iter().zip(ops) {
                let Collective::Reduce {
                    src,
                    dst: d,
                    root: rt,
                    ..
                } = c
                else {
                    return Err("reduce members disagree".into());
                };
                if rt != root {
                    return Err(format!(
                        "reduce members disagree on the root ({rt} on rank {r}, {root} on rank {})",
                        group[0]
                    ));
                }
                if *r == root_rank {
                    dst = d.as_ref();
                }
                let vals = vec![mem.read(plan, *r, src)];
                if vals[0].len() != acc.as_ref().map_or(vals[0].len(), |a| a[0].len()) {
                    return Err("reduce members' sources differ in size".into());
                }
                match acc.as_mut() {
                    None => acc = Some(vals),
                    Some(a) => combine(*kind, a, &vals),
                }
            }
            let acc = acc.ok_or("empty reduce")?;
            let dst = dst.ok_or("reduce root names no destination")?;
            if dst.region.numel() != acc[0].len() {
                return Err("reduce destination has the wrong size".into());
            }
            mem.write(plan, root_rank, dst, &acc[0]);
        }
        Collective::Broadcast { root, .. } => {
            let root_rank = *group.get(*root).ok_or("broadcast root outside the group")?;
            let pos = group.iter().position(|x| *x == root_rank).unwrap_or(0);
            let vals = if let Collective::Broadcast { buf, .. } = ops[pos] {
                mem.read(plan, root_rank, buf)
            } else {
                vec![]
            };
            for (r, c) in group.iter().zip(ops) {
                if let Collective::Broadcast { buf, .. } = c {
                    mem.write(plan, *r, buf, &vals);
                }
            }
        }
    }
    Ok(())
}
