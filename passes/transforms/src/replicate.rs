//! `replicate{buffer=K axis=j}`: makes buffer K replicated along the dimension bound to axis j
//! (every dimension without `axis`). A replicated read needs no transfer inside the loop nest
//! (the lowering gathers it first when it starts sharded). An output's declared placement is a
//! contract: replicating an output declared sharded is refused (see `parallelize`).

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `replicate`.
    pub struct Replicate = "replicate", "Replicate a buffer along an axis' dimension (or entirely)", {
        buffer: String => "the buffer",
        axis: String = "" => "the axis whose dimension is replicated (default: all)",
    }
}

impl KernelPass for Replicate {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let buf = m.buffer(&self.buffer).ok_or_else(|| {
            err_at(
                &m.loc,
                format!(
                    "replicate: '@{}' is not a buffer of '@{}'",
                    self.buffer, m.name
                ),
            )
        })?;
        let mut s = buf.sharding.clone();
        if self.axis.is_empty() {
            s.iter_mut().for_each(Vec::clear);
        } else {
            let d = buf.dim_of_axis(&self.axis).ok_or_else(|| {
                err_at(
                    &buf.loc,
                    format!(
                        "replicate: '@{}' is not bound to axis '@{}'",
                        self.buffer, self.axis
                    ),
                )
            })?;
            s[d].clear();
        }
        let mut to = buf.placement();
        to.levels = s.clone();
        keep_output_contract(
            "replicate",
            buf,
            &mercury_commir::Placement::new(to.levels, to.splits),
        )?;
        let k = kernel_mut(module, &m.name);
        let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
        set_sharding(&mut op.expect("buffer"), &s);
        Ok(())
    }
}
