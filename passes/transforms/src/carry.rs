//! `carry{buffer=dK}`: every shifted sum into buffer dK carries its accumulator along the ring
//! instead of sending each step's partial to the tile's owner. In a shifted loop rank p works
//! on piece (j + p + offset) mod J at step j; with `carry` the rank that works on a piece adds
//! its partial into the piece's accumulator, which it received from the rank that worked on the
//! piece one step before, and passes it on to the rank that works on it next: the accumulator
//! travels with the pieces (with the key/value blocks of a ring attention backward) and reaches
//! the owner after the last step. This is ring-flash-attn's backward (zhuzilin/ring-flash-attention,
//! `ring_flash_attn_backward`: `next_dk, next_dv = d_kv_comm.send_recv_kv(dk, dv)`): one
//! transfer per step to the next rank of the ring, where shift-reduce sends each step's partial
//! straight to its owner (a different peer at every step). With `shift{offset=1}` the owner's
//! own piece comes last and the accumulator ends at home; with offset 0 it takes one more step
//! home. The lowering adds each received accumulator after the stage's transfers (a stage of
//! adds after each ring step, `lowering/conversion/src/carry.rs`).

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::AccessOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::{Kernel, ReduceKind, Role, Stmt};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `carry`.
    pub struct Carry = "carry", "Carry a shifted sum's accumulator along the ring with the pieces (ring-flash-attn's dK/dV) instead of sending each partial to its owner", {
        buffer: String => "the output buffer whose shifted sums carry their accumulator",
    }
}

impl KernelPass for Carry {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let buf = m.buffer(&self.buffer).ok_or_else(|| {
            err_at(
                &m.loc,
                format!("carry: '@{}' is not a buffer of '@{}'", self.buffer, m.name),
            )
        })?;
        if buf.role == Role::Temp {
            return Err(err_at(
                &buf.loc,
                format!(
                    "carry: '@{}' is a temp buffer; only sums into an output carry an accumulator",
                    self.buffer
                ),
            ));
        }
        // Every reduction into the buffer: a shifted sum (an index that is not a plain axis:
        // the `(j + p) mod J` of `shift`).
        let mut found = 0;
        let mut refused = None;
        m.walk(&mut |s, _| {
            if let Stmt::Reduce { kind, access, .. } = s {
                if access.buffer != self.buffer {
                    return;
                }
                found += 1;
                let shifted = access.indices.iter().any(|e| e.as_axis().is_none());
                if refused.is_none() && (*kind != ReduceKind::Add || !shifted) {
                    let why = if *kind != ReduceKind::Add {
                        "only a sum ('add') carries its accumulator"
                    } else {
                        "it is not shifted (shift its loop by a parallel loop first): only a shifted sum has an accumulator that moves"
                    };
                    refused = Some(err_at(
                        &access.loc,
                        format!("carry: this reduction into '@{}' cannot carry: {why}", self.buffer),
                    ));
                }
            }
        });
        if let Some(e) = refused {
            return Err(e);
        }
        if found == 0 {
            return Err(err_at(
                &buf.loc,
                format!("carry: nothing is reduced into '@{}'", self.buffer),
            ));
        }
        let k = kernel_mut(module, &m.name);
        for_each_access_mut(k.body_mut(0), &mut Vec::new(), &mut |a, _| {
            if a.buffer().as_deref() == Some(self.buffer.as_str()) {
                if let AccessOp::Reduce(r) = a {
                    r.set_carry(true);
                }
            }
            Ok(())
        })?;
        Ok(())
    }
}
