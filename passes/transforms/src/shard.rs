//! `shard{buffer=K axis=j level=L}`: places buffer K sharded over mesh level L along the
//! dimension bound to axis j. Without `level`, the level is the one of the parallel loop over
//! j, or of the parallel loop that shifts the loop over j.

use crate::util::*;
use mercury_commir::ops::BufferOp;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "shard",
    summary: "Shard a buffer over a mesh level along the dimension of an axis",
    options: &[
        PassOptionDef {
            name: "buffer",
            help: "the buffer",
            default: None,
        },
        PassOptionDef {
            name: "axis",
            help: "the axis whose dimension is split",
            default: None,
        },
        PassOptionDef {
            name: "level",
            help: "mesh level (default: from the loop over the axis)",
            default: Some(""),
        },
        PassOptionDef {
            name: "kernel",
            help: "kernel to transform (default: all)",
            default: Some(""),
        },
    ],
    create: |o: &PassOptions| {
        let level = if o.get("level").is_empty() {
            None
        } else {
            Some(o.get_usize("level")?)
        };
        Ok(Box::new(Shard {
            buffer: opt_name(o.get("buffer")),
            axis: opt_name(o.get("axis")),
            level,
            kernel: o.get("kernel").to_string(),
        }))
    },
};

pub struct Shard {
    pub buffer: String,
    pub axis: String,
    pub level: Option<usize>,
    pub kernel: String,
}

impl Pass for Shard {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let m = model(module, &name)?;
            let buf = m.buffer(&self.buffer).ok_or_else(|| {
                Diagnostic::error(
                    m.loc.clone(),
                    format!("shard: '@{}' is not a buffer of '@{name}'", self.buffer),
                )
            })?;
            let dim = buf.dim_of_axis(&self.axis).ok_or_else(|| {
                Diagnostic::error(
                    buf.loc.clone(),
                    format!(
                        "shard: '@{}' is not bound to axis '@{}'",
                        self.buffer, self.axis
                    ),
                )
            })?;
            let level = match self.level {
                Some(l) => l,
                None => {
                    let lp = m.find_loop(&self.axis).ok_or_else(|| {
                        Diagnostic::error(
                            buf.loc.clone(),
                            format!(
                                "shard: no loop over '@{}' to take a mesh level from (give level=)",
                                self.axis
                            ),
                        )
                    })?;
                    match (lp.parallel, &lp.shift) {
                        (Some(l), _) => l,
                        (None, Some(by)) => m.find_loop(by).and_then(|p| p.parallel).expect("shift by a parallel loop"),
                        _ => return Err(Diagnostic::error(lp.loc.clone(), format!("shard: the loop over '@{}' is neither parallel nor shifted (give level=)", self.axis))),
                    }
                }
            };
            let mut s = buf.sharding.clone();
            if s[dim].contains(&level) {
                continue; // already placed so
            }
            if s.iter().flatten().any(|l| *l == level) {
                return Err(Diagnostic::error(
                    buf.loc.clone(),
                    format!(
                        "shard: '@{}' is already sharded over mesh level {level}",
                        self.buffer
                    ),
                ));
            }
            s[dim].push(level);
            mercury_commir::model::check_sharding(&self.buffer, &s, &m.shape(buf), &m.mesh)
                .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("shard: {e}")))?;
            let k = kernel_mut(module, &name);
            let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
            set_sharding(&mut op.expect("buffer"), &s);
        }
        Ok(())
    }
}
