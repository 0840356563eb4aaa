//! `replicate{buffer=K axis=j}`: makes buffer K replicated along the dimension bound to axis j
//! (every dimension without `axis`). A replicated read needs no transfer inside the loop nest
//! (the lowering gathers it first when it starts sharded).

use crate::util::*;
use mercury_commir::ops::BufferOp;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "replicate",
    summary: "Replicate a buffer along an axis' dimension (or entirely)",
    options: &[
        PassOptionDef {
            name: "buffer",
            help: "the buffer",
            default: None,
        },
        PassOptionDef {
            name: "axis",
            help: "the axis whose dimension is replicated (default: all)",
            default: Some(""),
        },
        PassOptionDef {
            name: "kernel",
            help: "kernel to transform (default: all)",
            default: Some(""),
        },
    ],
    create: |o: &PassOptions| {
        Ok(Box::new(Replicate {
            buffer: opt_name(o.get("buffer")),
            axis: opt_name(o.get("axis")),
            kernel: o.get("kernel").to_string(),
        }))
    },
};

pub struct Replicate {
    pub buffer: String,
    pub axis: String,
    pub kernel: String,
}

impl Pass for Replicate {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let m = model(module, &name)?;
            let buf = m.buffer(&self.buffer).ok_or_else(|| {
                Diagnostic::error(
                    m.loc.clone(),
                    format!("replicate: '@{}' is not a buffer of '@{name}'", self.buffer),
                )
            })?;
            let mut s = buf.sharding.clone();
            if self.axis.is_empty() {
                s.iter_mut().for_each(Vec::clear);
            } else {
                let d = buf.dim_of_axis(&self.axis).ok_or_else(|| {
                    Diagnostic::error(
                        buf.loc.clone(),
                        format!(
                            "replicate: '@{}' is not bound to axis '@{}'",
                            self.buffer, self.axis
                        ),
                    )
                })?;
                s[d].clear();
            }
            let k = kernel_mut(module, &name);
            let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
            set_sharding(&mut op.expect("buffer"), &s);
        }
        Ok(())
    }
}
